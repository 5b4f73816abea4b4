import type { ChainableCommander, Redis } from 'ioredis';
import { connectRedis } from '../../src/redis/connection.js';
import { keys, type KeySpace } from '../../src/redis/keys.js';
import { loadScripts, pipelineScript } from '../../src/redis/scripts.js';
import {
  answerCallKeysArgs,
  createCallKeysArgs,
  endCallKeysArgs,
  fingerprint,
  type ScriptCall,
  type StoreSettings,
} from '../../src/calls/store.js';
import { EventLog, type RelayedDelivery } from '../../src/events/eventLog.js';
import { busyMarkerOps, type MarkerOp } from '../../src/calls/activeCalls.js';
import { deliveriesFor } from '../../src/events/audience.js';
import { usersToLookUp } from '../../src/push/planner.js';
import type { CallChange } from '../../src/calls/change.js';
import type { PairCall } from '../../src/calls/model.js';
import { readStoredCall } from '../../src/calls/storedCall.js';
import { RELAY_GROUP } from '../../src/events/outboxAcks.js';
import { countInto } from '../lib/waiter.js';
import { nowMs, sleepUntil } from '../lib/clock.js';
import type { Task } from './task.js';

/**
 * The Redis-bound ceiling: the Redis work of one call lifecycle, pipelined from a separate client
 * with no HTTP, no WebSocket and no server in between, using the project's own scripts with keys
 * and arguments from the project's own builders (src/calls/store.ts, src/events/eventLog.ts):
 *   per mutation (create, answer, end): the operation binding SET NX GET + the call script
 *   (whose ring index entry is the ring timer);
 *   per create: the callee's busy marker HGET (busy check, CALL_WAITING off);
 *   per change: the relay's appendEvents, one call for the change's users as on a single Redis
 *   (XADD + SPUBLISH to subscribed channels, the busy markers and the push registrations the push
 *   handler needs in the same script), its
 *   XREADGROUP of the outbox and XACK (acknowledged entries are trimmed in bulk once a second:
 *   left out here); per create: the invited call's read by the push handler (src/calls/storedCall.ts
 *   readStoredCall, a GET in the relay's pipeline).
 * Variants: `lifecycle` and `create` (create + invitation delivery only: the Redis work behind
 * one delivered event).
 * Not included: the ring sweeps (a few commands per second per shard, whatever the call rate).
 */

export type CeilingVariant = 'lifecycle' | 'create';

export interface CeilingSetup {
  redisUrl: string;
  prefix: string;
  users: number;
  ringTimeoutMs: number;
  /** CALL_RECORD_FORMAT (--record-format): how the scripts store each call. */
  recordFormat?: 'string' | 'hash';
}

export interface CeilingRun {
  variant: CeilingVariant;
  durationMs: number;
  startAtMs: number;
  batch: number;
  lanes: number;
}

export interface CeilingResult {
  variant: CeilingVariant;
  lifecycles: number;
  perSecond: number;
  commandsPerLifecycle: number;
  errors: Record<string, number>;
  wallMs: number;
  published: number;
}

export function createTask(): Task {
  let s: CeilingSetup;
  let redis: Redis;
  let sub: Redis;
  let ks: KeySpace;
  let store: StoreSettings;
  let eventLog: EventLog;
  let streamKeys: string[];
  let published = 0;
  let seq = 0;
  /** Failures of reads made through the project's readers (their promises settle after exec). */
  let readErrors: Record<string, number> = {};
  /** Where in the current pipeline the call reads are. */
  const readsAt = new Set<number>();

  return {
    async setup(raw) {
      s = raw as CeilingSetup;
      ks = { prefix: s.prefix, shards: 8 };
      store = { ...ks, ringTimeoutMs: s.ringTimeoutMs, retentionMs: 24 * 3600_000, operationTtlMs: 24 * 3600_000, callWaiting: false, maxRenamesPerCall: 10, ...(s.recordFormat ? { callRecordFormat: s.recordFormat } : {}) };
      // The server's own connection settings, but a measuring client waits for a busy Redis rather
      // than fail at the production 500 ms (the bench smoke test runs beside the rest of npm test).
      redis = connectRedis(s.redisUrl, 'commands', 'bench-ceiling', 10_000);
      await redis.connect();
      await loadScripts(redis);
      // Only its appendUsersCall (appendEvents with the project's arguments) is used here.
      eventLog = new EventLog(redis, { ...ks, maxLen: 1000, maxAgeMs: 24 * 3600_000, metaTtlMs: 7 * 24 * 3600_000 });
      sub = connectRedis(s.redisUrl, 'subscriber', 'bench-ceiling');
      await sub.connect();
      // The gateways' side: every user's live channel has a subscriber, so SPUBLISH really fans out.
      const channels: string[] = [];
      for (let u = 0; u < s.users; u++) channels.push(keys.liveChannel(ks, `caller${u}`), keys.liveChannel(ks, `callee${u}`));
      for (const channel of channels) await sub.ssubscribe(channel);
      sub.on('smessage', () => published++);
      streamKeys = Array.from({ length: ks.shards }, (_, i) => keys.outboxForShard(ks, i));
      for (const key of streamKeys) {
        await redis.xgroup('CREATE', key, RELAY_GROUP, '0', 'MKSTREAM').catch((e: Error) => {
          if (!e.message.includes('BUSYGROUP')) throw e;
        });
      }
      return { channels: channels.length };
    },

    async run(raw) {
      const r = raw as CeilingRun;
      const errors: Record<string, number> = {};
      readErrors = errors;
      let done = 0;
      let commands = 0;
      published = 0;
      await sleepUntil(r.startAtMs);
      const t0 = nowMs();
      const deadline = t0 + r.durationMs;

      const lane = async (laneNo: number) => {
        const consumer = `bench-${process.pid}-${laneNo}`;
        while (nowMs() < deadline) {
          const n = r.batch;
          const p = redis.pipeline();
          readsAt.clear();
          let cmds = 0;
          const calls: PairCall[] = [];
          for (let i = 0; i < n; i++) {
            const call = syntheticCall(`cl${process.pid}.${seq++}`, seq % s.users);
            calls.push(call);
            cmds += addLifecycle(p, call, r.variant);
          }
          const results = (await p.exec()) ?? [];
          for (const [i, [err, reply]] of results.entries()) {
            // A call read's failure is the reader's to judge (a hash record's GET fails WRONGTYPE and is read again).
            if (readsAt.has(i)) continue;
            if (err) countInto(errors, `redis: ${err.message.slice(0, 60)}`);
            else if (Array.isArray(reply) && reply[0] === 'error') countInto(errors, `script: ${String(reply[1])}`);
          }
          // The relay: read the outbox entries these changes wrote and acknowledge them.
          const read = (await redis.xreadgroup(
            'GROUP', RELAY_GROUP, consumer, 'COUNT', 10_000, 'STREAMS', ...streamKeys, ...streamKeys.map(() => '>'),
          )) as [string, [string, string[]][]][] | null;
          cmds++;
          if (read) {
            // As the relay does: one XACK per stream batch (the relay sends it with its next read).
            await Promise.all(
              read
                .filter(([, entries]) => entries.length > 0)
                .map(([key, entries]) => {
                  cmds++;
                  return redis.xack(key, RELAY_GROUP, ...entries.map((e) => e[0]));
                }),
            );
          }
          done += n;
          commands += cmds;
        }
      };
      await Promise.all(Array.from({ length: r.lanes }, (_, i) => lane(i)));
      const wallMs = nowMs() - t0;
      return {
        variant: r.variant,
        lifecycles: done,
        perSecond: (done * 1000) / wallMs,
        commandsPerLifecycle: done ? commands / done : 0,
        errors,
        wallMs,
        published,
      } satisfies CeilingResult;
    },

    async teardown() {
      sub?.disconnect();
      redis?.disconnect();
    },
  };

  /** Adds one lifecycle's commands (in causal order) to the pipeline; returns how many. */
  function addLifecycle(p: ChainableCommander, call: PairCall, variant: CeilingVariant): number {
    const caller = call.callerUserId;
    const callee = call.calleeUserId;
    const winner = `${callee}-d0`;
    let n = 0;
    // On a single Redis each change's script takes the operationId binding itself (its last key).
    const mutate = <N extends 'createCall' | 'answerCall' | 'endCall'>(c: ScriptCall<N>, script: N) => {
      pipelineScript(p, script, c.keys, c.args);
      n += 1;
    };
    const relay = (change: CallChange) => {
      // Each change appended once per user, as a new outbox entry (the append skips entries it has).
      const entryId = `${Date.now()}-${seq++}`;
      const byUser = new Map<string, { deliveries: RelayedDelivery[]; marker?: MarkerOp }>();
      const of = (u: string) => byUser.get(u) ?? byUser.set(u, { deliveries: [] }).get(u)!;
      for (const delivery of deliveriesFor(change)) of(delivery.userId).deliveries.push({ entryId, delivery });
      for (const [u, marker] of busyMarkerOps(change)) of(u).marker = marker;
      // The push registrations the relay's push handler needs come back from the same append.
      const withPush = new Set(usersToLookUp(change));
      for (const u of withPush) of(u);
      if (byUser.size === 0) return;
      // One call for the change's users, as the relay makes one per batch on a single Redis.
      const c = eventLog.appendUsersCall([...byUser].map(([userId, u]) => ({ userId, shard: 0, deliveries: u.deliveries, marker: u.marker, withPush: withPush.has(userId) })));
      pipelineScript(p, 'appendEvents', c.keys, c.args);
      n++;
    };
    const now = Date.now();
    // The change scripts publish their early notices, as on any single Redis (docs/signaling.md
    // "Early events"). Busy detection (CALL_WAITING off, the default): the callee's busy marker.
    p.hget(keys.eventLogMeta(ks, callee), 'active');
    n++;
    mutate(createCallKeysArgs(store, {
      callId: call.callId,
      callerUserId: caller,
      callerInstallationId: call.callerInstallationId,
      callerDisplayName: call.callerDisplayName,
      callerHandle: call.callerHandle,
      calleeUserId: callee,
      video: false,
      operationId: `${call.callId}.create`,
      fingerprint: fingerprint('create', [call.callId, callee, false]),
    }, false, true, 'single'), 'createCall');
    relay({ entryId: '0-0', shard: 0, kind: 'created', atMs: now, call });
    // The push handler's read of the invited call, through the project's reader (a GET in the
    // relay's pipeline, as src/events/shardReader.ts reads it): any failure is an error of the run.
    readsAt.add(p.length);
    readStoredCall(redis, keys.call(ks, call.callId), p).catch((err: Error) => countInto(readErrors, `read call: ${err.message.slice(0, 60)}`));
    n++;
    if (variant === 'create') return n;
    const fpA = fingerprint('answer', [call.callId, winner, null]);
    mutate(answerCallKeysArgs(store, { callId: call.callId, userId: callee, installationId: winner, expectedRevision: undefined, operationId: `${call.callId}.answer`, fingerprint: fpA }, true, 'single'), 'answerCall');
    const accepted: PairCall = { ...call, state: 'accepted', revision: '2', answeredByInstallationId: winner, acceptedAtMs: now };
    relay({ entryId: '0-0', shard: 0, kind: 'answered', atMs: now, call: accepted });
    const fpE = fingerprint('end', [call.callId, 'localHangup']);
    mutate(endCallKeysArgs(store, { callId: call.callId, userId: caller, installationId: call.callerInstallationId, reason: 'localHangup', operationId: `${call.callId}.end`, fingerprint: fpE }, true, 'single'), 'endCall');
    const ended: PairCall = { ...accepted, state: 'ended', revision: '3', endedAtMs: now, endReason: 'localHangup', endedBy: 'caller', endedByInstallationId: call.callerInstallationId };
    relay({ entryId: '0-0', shard: 0, kind: 'ended', atMs: now, call: ended });
    return n;
  }

  function syntheticCall(callId: string, u: number): PairCall {
    const now = Date.now();
    return {
      kind: 'pair',
      callId,
      state: 'ringing',
      revision: '1',
      callerUserId: `caller${u}`,
      callerInstallationId: `caller${u}-phone`,
      callerDisplayName: 'Bench Caller',
      callerHandle: `app:caller${u}`,
      calleeUserId: `callee${u}`,
      video: false,
      createdAtMs: now,
      expiresAtMs: now + s.ringTimeoutMs,
    };
  }
}
