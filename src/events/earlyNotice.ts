import { deliveriesFor } from './audience.js';
import { parseChange } from '../calls/change.js';
import { participants } from '../calls/participants.js';
import type { Delivery } from './delivery.js';

/**
 * Early notices (docs/signaling.md "Early events"). On a single Redis, the script that makes a
 * change a device asked for (create, answer, end, rename) also publishes the change's outbox
 * entry once, on its call shard's early channel (keys.earlyChannel), as a live message with this
 * epoch and the entry's fields as a JSON array (lua/includes/appendOutbox.lua). Every gateway
 * subscribes to every shard's early channel; it derives the events of the parties it holds
 * sockets of with the relay's own audience rules (audience.ts) and sends them at once, without a
 * cursor; the relay's copies follow with their cursors.
 */
export const EARLY_EPOCH = '!early';

/** One user's events of one change, derived from an early notice. */
export interface EarlyEvents {
  callId: string;
  revision: number;
  /** The call ended with this change: no later change follows. */
  ended: boolean;
  /** The user's events: payload JSON, narrowed to or away from one installation. */
  events: { json: string; only: string | undefined; except: string | undefined }[];
}

/** An early notice, parsed once for every gateway socket it concerns. */
export interface EarlyNotice {
  callId: string;
  revision: number;
  ended: boolean;
  /**
   * Every party of the call: each socket of theirs counts the notice (it keeps the call's
   * revisions in step, docs/signaling.md "Early events"), with events for it or not.
   */
  parties: string[];
  deliveries: readonly Delivery[];
}

/** The notice in an early channel message's body; undefined if it is not one. */
export function parseEarlyNotice(body: string): EarlyNotice | undefined {
  let flat: unknown;
  try {
    flat = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (!Array.isArray(flat) || !flat.every((f) => typeof f === 'string')) return undefined;
  let change;
  try {
    change = parseChange('', -1, flat as string[]);
  } catch {
    return undefined;
  }
  const { call } = change;
  const revision = Number(call.revision);
  if (!Number.isSafeInteger(revision)) return undefined;
  return {
    callId: call.callId,
    revision,
    ended: change.kind === 'ended',
    parties: participants(call).map((p) => p.userId),
    deliveries: deliveriesFor(change),
  };
}

/** A user's events of a notice (none for a user who is a party without any). */
export function earlyEventsFor(notice: EarlyNotice, userId: string): EarlyEvents {
  return {
    callId: notice.callId,
    revision: notice.revision,
    ended: notice.ended,
    events: notice.deliveries.filter((d) => d.userId === userId).map((d) => ({ json: JSON.stringify(d.payload), only: d.only, except: d.except })),
  };
}
