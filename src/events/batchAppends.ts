import { indexOpsOf, type IndexOps } from '../history/callHistory.js';
import type { CallChange } from '../calls/change.js';
import { busyMarkerOps, type MarkerOp } from '../calls/activeCalls.js';
import type { Topology } from '../redis/connection.js';
import { deliveriesFor } from './audience.js';
import type { RelayedDelivery, UserAppend } from './eventLog.js';

/**
 * What lua/appendEvents.lua does for one relay batch, by user (docs/architecture.md "Relays"):
 * each user's events in outbox order, the batch's last busy marker change for the user, the calls
 * that started or ended in the user's call index (docs/call-history.md), and whether the
 * handlers want the user's push registrations back; split into the script calls that carry it.
 */

/**
 * At most this many users per appendEvents.lua call on a single Redis (bigger batches are split):
 * one call's run blocks Redis, and its arguments are held in memory at once.
 */
const USERS_PER_APPEND = 64;

/** Each user's part of a batch of `changes` from outbox shard `shard`. */
export function userAppendsOf(changes: readonly CallChange[], shard: number, withPush: ReadonlySet<string>): UserAppend[] {
  const byUser = new Map<string, { deliveries: RelayedDelivery[]; marker?: MarkerOp; index: IndexOps }>();
  const of = (userId: string) => {
    let u = byUser.get(userId);
    if (!u) byUser.set(userId, (u = { deliveries: [], index: [] }));
    return u;
  };
  for (const change of changes) {
    for (const delivery of deliveriesFor(change)) of(delivery.userId).deliveries.push({ entryId: change.entryId, delivery });
    for (const [userId, marker] of busyMarkerOps(change)) of(userId).marker = marker;
    indexOpsOf(change, (userId, op) => of(userId).index.push(op));
  }
  for (const userId of withPush) of(userId);
  return [...byUser].map(([userId, u]) => ({ userId, shard, deliveries: u.deliveries, marker: u.marker, withPush: withPush.has(userId), index: u.index }));
}

/**
 * The users of each appendEvents.lua call: on a single Redis every user's keys are on the one
 * node, so one call serves many users; on a cluster each user's keys live in their own hash
 * slot, so each user is a call.
 */
export function appendCallsOf(users: readonly UserAppend[], topology: Topology): UserAppend[][] {
  const size = topology === 'single' ? USERS_PER_APPEND : 1;
  const out: UserAppend[][] = [];
  for (let i = 0; i < users.length; i += size) out.push(users.slice(i, i + size));
  return out;
}
