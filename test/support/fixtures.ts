import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect } from 'vitest';
import { Redis } from 'ioredis';
import { api, type Api, type ApiResponse } from './http.js';
import { tokenFor } from './tokens.js';
import { errorCatalogue, type ErrorCode } from '../../src/commands/errors.js';
import { connectRedis } from '../../src/redis/connection.js';
import { keys, shardOf, type KeySpace } from '../../src/redis/keys.js';
import { RELAY_GROUP } from '../../src/events/outboxAcks.js';
import { compareStreamIds } from '../../src/events/cursor.js';
import { fingerprint, type CreateInput } from '../../src/calls/store.js';
import { startRedis, type RedisServer } from './redis-server.js';
import { ALICE_CALLS_BOB } from './callRecords.js';

/** Shared helpers of the integration tests: devices, calls, problem bodies and Redis state. */

export const uid = (prefix: string) => `${prefix}-${randomUUID()}`;

/** One installation of one user, with its session token and an API client bound to it. */
export interface Device {
  userId: string;
  installationId: string;
  token: string;
  api: Api;
}

export function device(url: string, userId = uid('user'), installationId = uid('inst'), name?: string): Device {
  const token = tokenFor({ userId, installationId, ...(name !== undefined ? { name } : {}) });
  return { userId, installationId, token, api: api(url, token) };
}

/** Another installation of the same user. */
export function sibling(url: string, d: Device): Device {
  return device(url, d.userId);
}

export interface CallPair {
  callId: string;
  caller: Device;
  callee: Device;
  /** The 201 create response. */
  created: ApiResponse;
}

/** Creates a ringing call from a new caller to a new callee (or the given devices). */
export async function ringingCall(url: string, caller = device(url), callee = device(url)): Promise<CallPair> {
  const callId = randomUUID();
  const created = await caller.api.post('/v1/calls', { callId, calleeUserId: callee.userId, operationId: uid('op') });
  expect(created.status, created.text).toBe(201);
  return { callId, caller, callee, created };
}

/** The servers' default CALL_SHARDS (src/config/config.ts). */
export const DEFAULT_CALL_SHARDS = 8;

/**
 * A fresh callId whose changes go to the same outbox shard as `callId`'s. A shard is relayed in
 * outbox order (docs/architecture.md "Relays"), so once a change of the returned call has reached a log, every
 * earlier change of `callId` has too: a barrier for "nothing else arrived". Calls in other shards
 * may be relayed in any order and prove nothing.
 */
export function sameShardCallId(callId: string, shards = DEFAULT_CALL_SHARDS): string {
  const shard = shardOf(callId, shards);
  for (;;) {
    const id = randomUUID();
    if (shardOf(id, shards) === shard) return id;
  }
}

/**
 * Barriers for "nothing else arrived" at the installations of `userId` after the changes made so
 * far to the calls `after`. For each outbox shard among those calls, a fresh installation of the
 * user calls a fresh user on a callId of that shard (sameShardCallId), who declines: every caller
 * installation is told (docs/api.md "Who receives what"; should the barrier call ring out first, it is
 * told `unanswered` instead), also while the user is in another call (docs/api.md "Busy and call
 * waiting": only a busy callee ends a new call). The shard is relayed in order (docs/architecture.md "Relays") and an
 * installation receives its events in log order (docs/signaling.md), so once an installation has
 * an event of each returned barrier call, everything the earlier changes of `after` sent it has
 * arrived. Returns the barrier calls' ids (one per shard).
 */
export async function shardBarriers(url: string, userId: string, after: readonly string[], shards = DEFAULT_CALL_SHARDS): Promise<string[]> {
  const oneCallPerShard = new Map(after.map((callId) => [shardOf(callId, shards), callId]));
  return Promise.all(
    [...oneCallPerShard.values()].map(async (callId) => {
      const barrier = sameShardCallId(callId, shards);
      const caller = device(url, userId);
      const callee = device(url);
      const created = await caller.api.post('/v1/calls', { callId: barrier, calleeUserId: callee.userId, operationId: uid('op') });
      expect(created.status, created.text).toBe(201);
      const declined = await end(callee, barrier, 'declined');
      expect(declined.status, declined.text).toBe(200);
      return barrier;
    }),
  );
}

/** A ringing call answered by the callee device. */
export async function acceptedCall(url: string, caller = device(url), callee = device(url)): Promise<CallPair & { answered: ApiResponse }> {
  const pair = await ringingCall(url, caller, callee);
  const answered = await answer(pair.callee, pair.callId);
  expect(answered.status, answered.text).toBe(200);
  return { ...pair, answered };
}

export function answer(d: Device, callId: string, extra: Record<string, unknown> = {}): Promise<ApiResponse> {
  return d.api.post(`/v1/calls/${callId}/answer`, { operationId: uid('op'), installationId: d.installationId, ...extra });
}

export function end(d: Device, callId: string, reason: string, operationId = uid('op')): Promise<ApiResponse> {
  return d.api.post(`/v1/calls/${callId}/end`, { operationId, reason });
}

export function rename(d: Device, callId: string, displayName: string, operationId = uid('op')): Promise<ApiResponse> {
  return d.api.post(`/v1/calls/${callId}/rename`, { operationId, displayName });
}

export function getCall(d: Device, callId: string): Promise<ApiResponse> {
  return d.api.get(`/v1/calls/${callId}`);
}

/** HTTP status of every error code, as docs/api.md "Errors" fixes them (not read from the code under test). */
export const STATUS_OF: Record<ErrorCode, number> = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  answer_conflict: 409,
  idempotency_conflict: 409,
  revision_conflict: 409,
  call_exists: 409,
  not_in_call: 409,
  call_not_active: 409,
  group_call_full: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal: 500,
  unavailable: 503,
  sfu_unavailable: 503,
};

/**
 * Asserts an RFC 9457 problem response: status, `application/problem+json`, exactly the members
 * type/title/status/detail/code (plus `extraMembers`), and the detail.
 */
export function expectProblem(res: ApiResponse, code: ErrorCode, detail: string | RegExp, extraMembers: string[] = []): void {
  const context = `${res.status} ${res.text}`;
  expect(res.status, context).toBe(STATUS_OF[code]);
  expect(res.headers.get('content-type'), context).toBe('application/problem+json');
  expect(res.json, context).toBeTypeOf('object');
  expect(Object.keys(res.json).sort(), context).toEqual(['code', 'detail', 'status', 'title', 'type', ...extraMembers].sort());
  expect(res.json.code, context).toBe(code);
  expect(res.json.status, context).toBe(STATUS_OF[code]);
  expect(res.json.title, context).toBe(errorCatalogue[code].title);
  expect(res.json.type, context).toMatch(new RegExp(`^https://[^\\s]+/${code}$`));
  if (typeof detail === 'string') expect(res.json.detail, context).toBe(detail);
  else expect(res.json.detail, context).toMatch(detail);
}

/** A plain (non-problem) JSON success: status and content type. */
export function expectJson(res: ApiResponse, status: number): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type'), res.text).toBe('application/json');
}

/** A connected `blocking` connection of the project's kind, as the relay opens one per shard. */
export async function relayBlockingConnection(url: string): Promise<Redis> {
  const c = connectRedis(url, 'blocking', 'test');
  await c.connect();
  return c;
}

/**
 * A Redis of the calling test file's own and an auto-pipelining client on it: started before the
 * file's tests, stopped after them. Read `redis` and `server` inside tests (they are set then).
 */
export function fileRedis(): { readonly redis: Redis; readonly server: RedisServer } {
  const state = {} as { redis: Redis; server: RedisServer };
  beforeAll(async () => {
    state.server = await startRedis();
    state.redis = new Redis(state.server.url, { enableAutoPipelining: true });
  });
  afterAll(async () => {
    state.redis?.disconnect();
    await state.server?.stop();
  });
  return state;
}

export function connectTestRedis(url: string): Redis {
  const r = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: false });
  r.on('error', () => {});
  return r;
}

/**
 * The whole keyspace: every key with its DUMP (type, value and encoding) and its absolute expiry
 * (PEXPIRETIME: -1 none), so that any write, including a changed TTL, shows as a difference.
 */
export async function keyspace(redis: Redis): Promise<Record<string, string>> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  keys.sort();
  const out: Record<string, string> = {};
  for (const key of keys) {
    const dump = await redis.dumpBuffer(key);
    const expireAt = await redis.call('PEXPIRETIME', key);
    out[key] = `${String(expireAt)} ${dump ? dump.toString('hex') : '(gone)'}`;
  }
  return out;
}

/** Runs `fn` and asserts that the Redis keyspace is byte-for-byte the same afterwards. */
export async function expectRedisUnchanged<T>(redis: Redis, fn: () => Promise<T>): Promise<T> {
  const before = await keyspace(redis);
  expect(Object.keys(before).length, 'the keyspace should not be empty before the check').toBeGreaterThan(0);
  const result = await fn();
  const after = await keyspace(redis);
  expect(after).toEqual(before);
  return result;
}

/** The device's head cursor in its event log (no history). */
export async function headCursor(d: Device): Promise<string> {
  const res = await d.api.get('/v1/call-events');
  expect(res.status, res.text).toBe(200);
  return res.json.nextCursor as string;
}

/**
 * Reads the device's events from `cursor` until `done(events)` holds (the relay is asynchronous),
 * failing after `timeoutMs`. Returns every event read.
 */
export async function eventsUntil(d: Device, cursor: string, done: (events: any[]) => boolean, timeoutMs = 5000): Promise<any[]> {
  const events: unknown[] = [];
  let c = cursor;
  await waitUntil(`events for ${d.userId}/${d.installationId}`, async () => {
    const res = await d.api.get(`/v1/call-events?cursor=${encodeURIComponent(c)}`);
    expect(res.status, res.text).toBe(200);
    expect(res.json.gap, res.text).toBeUndefined();
    events.push(...(res.json.events as unknown[]));
    c = res.json.nextCursor as string;
    return done(events);
  }, timeoutMs).catch((err: Error) => {
    throw new Error(`${err.message}; got ${JSON.stringify(events)}`);
  });
  return events;
}

/** Re-exported: the one sleep lives in test/support/wait.ts. */
export { sleep } from './wait.js';
import { waitUntil } from './wait.js';

/**
 * Barrier: the relay is done with every change made so far to the calls `callIds`. The relay
 * acknowledges an outbox entry only once its events are stored and every side effect of it is
 * done (docs/architecture.md "Relays"), so for each outbox shard of the calls this waits until the relay has
 * read the shard up to its newest entry of this moment and holds none of those entries pending.
 */
export async function relayDone(redis: Redis, ks: KeySpace, callIds: readonly string[], timeoutMs = 10_000): Promise<void> {
  const shards = [...new Set(callIds.map((callId) => shardOf(callId, ks.shards)))];
  await Promise.all(
    shards.map(async (shard) => {
      const outbox = keys.outboxForShard(ks, shard);
      const [newest] = (await redis.xrevrange(outbox, '+', '-', 'COUNT', 1)) as [string, string[]][];
      // An empty outbox: everything in it was relayed, acknowledged and trimmed.
      if (!newest) return;
      const mark = newest[0];
      await waitUntil(
        `the relay done with outbox shard ${shard} up to ${mark}`,
        async () => {
          const groups = (await redis.xinfo('GROUPS', outbox)) as unknown[][];
          const group = groups.map((g) => new Map(Array.from({ length: g.length / 2 }, (_, i) => [String(g[2 * i]), g[2 * i + 1]]))).find((g) => g.get('name') === RELAY_GROUP);
          if (compareStreamIds(String(group?.get('last-delivered-id') ?? '0-0'), mark) < 0) return false;
          return ((await redis.xpending(outbox, RELAY_GROUP, '-', mark, 1)) as unknown[]).length === 0;
        },
        timeoutMs,
      );
    }),
  );
}

/**
 * A CallStore create of a new call (`callId`): `caller` on `<caller>-phone` calls `callee`
 * (default `<caller>-callee`), audio, with operation `op-<callId>`.
 */
export function createInput(caller: string, callee = `${caller}-callee`, callId = randomUUID()): CreateInput {
  return {
    callId,
    callerUserId: caller,
    callerInstallationId: `${caller}-phone`,
    callerDisplayName: 'Caller',
    callerHandle: `app:${caller}`,
    calleeUserId: callee,
    video: false,
    operationId: `op-${callId}`,
    fingerprint: fingerprint('create', [callId, callee, false]),
  };
}

/** A CallStore create of `callId`: Alice (alice-phone) calls Bob, audio, with `operationId`. */
export function aliceCallsBob(callId: string, operationId: string): CreateInput {
  return {
    callId,
    ...ALICE_CALLS_BOB,
    operationId,
    fingerprint: fingerprint('create', [callId, 'bob', false]),
  };
}
