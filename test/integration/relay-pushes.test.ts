import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_REDIS_COMMAND_TIMEOUT_MS } from '../support/server.js';
import { randomBytes, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import type { Queue, Worker } from 'bullmq';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { createInput, relayBlockingConnection } from '../support/fixtures.js';
import { makeApnsKey, startFakeApns, type FakeApns } from '../support/apns-server.js';
import { connectRedis } from '../../src/redis/connection.js';
import { loadScripts } from '../../src/redis/scripts.js';
import { keys, shardOf } from '../../src/redis/keys.js';
import { CallStore, fingerprint } from '../../src/calls/store.js';
import { EventLog } from '../../src/events/eventLog.js';
import { OutboxRelay } from '../../src/events/relay.js';
import { RELAY_GROUP } from '../../src/events/outboxAcks.js';
import { parseChange, type CallChange, type ChangeHandler } from '../../src/calls/change.js';
import { PushRegistry } from '../../src/push/registry.js';
import { DAY_MS } from '../../src/calls/retention.js';
import { PushDispatcher, type PushOutcomes } from '../../src/push/dispatcher.js';
import { createPushQueues, type PushRetryJob } from '../../src/push/queues.js';
import { startPushRetryWorkers } from '../../src/push/pushWorker.js';
import { pushHandler } from '../../src/push/relayPushes.js';
import { ApnsSender } from '../../src/push/apns.js';
import { Http2Pool } from '../../src/push/http2Pool.js';
import { createLogger } from '../../src/util/logger.js';
import { waitUntil } from '../e2e/helpers.js';
import { sleep } from '../support/wait.js';

/**
 * Pushes sent by the relay (docs/architecture.md "Push"): the first attempt goes out right after the events are
 * stored; only failed messages become a BullMQ retry job, and a batch the relay retries (another
 * side effect failed) sends none of its pushes again. A fresh invitation goes out from the call as
 * its batch knows it; one relayed late has its call read again first.
 */

const BUNDLE_ID = 'com.example.calls';
const ks = { prefix: 'rp', shards: 4 };
const partitioning = { ...ks, partitions: 2 };
const logger = createLogger('fatal', new Writable({ write: (_c, _e, cb) => cb() }));
let server: RedisServer;
let redis: Redis;
let queueConn: Redis;
let apns: FakeApns;
let pool: Http2Pool;
let calls: CallStore;
let registry: PushRegistry;
let eventLog: EventLog;
let retryQueues: Queue<PushRetryJob>[];
let retryWorkers: Worker<PushRetryJob>[];
let dispatcher: PushDispatcher;
const outcomes: PushOutcomes = new Map();

beforeAll(async () => {
  server = await startRedis();
  redis = connectRedis(server.url, 'commands', 'test', TEST_REDIS_COMMAND_TIMEOUT_MS);
  queueConn = connectRedis(server.url, 'queues', 'test-queues');
  await redis.connect();
  await loadScripts(redis);
  const key = makeApnsKey();
  apns = await startFakeApns({ bundleId: BUNDLE_ID, keyId: key.keyId, teamId: key.teamId, publicKey: key.publicKey });
  pool = new Http2Pool();
  const apnsSender = new ApnsSender({ productionUrl: apns.url, keyPem: key.privateKeyPem, keyId: key.keyId, teamId: key.teamId, bundleId: BUNDLE_ID, pool });
  calls = new CallStore(redis, { ...ks, ringTimeoutMs: 45_000, retentionMs: 60_000, operationTtlMs: 60_000, callWaiting: true, maxRenamesPerCall: 10 });
  registry = new PushRegistry(redis, ks, DAY_MS);
  eventLog = new EventLog(redis, { ...ks, maxLen: 100, maxAgeMs: 60_000, metaTtlMs: 600_000 });
  retryQueues = createPushQueues(queueConn, partitioning);
  dispatcher = new PushDispatcher({
    registry,
    peekCall: (id) => calls.peek(id),
    senders: { apns: apnsSender },
    retryQueues,
    partitioning,
    logger,
    outcomes,
  });
  retryWorkers = startPushRetryWorkers(queueConn, partitioning, 8, dispatcher, logger);
});
afterAll(async () => {
  await Promise.all(retryWorkers?.map((w) => w.close()) ?? []);
  await Promise.all(retryQueues?.map((q) => q.close()) ?? []);
  await pool?.close();
  await apns?.close();
  queueConn?.disconnect();
  redis?.disconnect();
  await server?.stop();
});

const blockingConnection = () => relayBlockingConnection(server.url);
const IOS_ONLY = { iosVoip: true, androidPush: false };

/** A started relay with these handlers, reading `batchSize` entries at a time. */
async function startedRelay(handlers: ChangeHandler[], batchSize = 64): Promise<OutboxRelay> {
  const relay = new OutboxRelay(redis, blockingConnection, eventLog, handlers, logger, { ...ks, batchSize, gatherMs: 0, blockMs: 100, leaseMs: 3000 });
  await relay.start();
  return relay;
}

async function iPhones(userId: string, n: number): Promise<string[]> {
  const tokens: string[] = [];
  for (let i = 0; i < n; i++) {
    const token = randomBytes(32).toString('hex');
    await registry.register({ userId, installationId: `${userId}-iphone-${i}`, kind: 'iosVoip', token, appId: BUNDLE_ID, iosEnvironment: 'production' });
    tokens.push(token);
  }
  return tokens;
}

async function createCall(callee: string): Promise<string> {
  const input = createInput(`${callee}-caller`, callee);
  const out = await calls.create(input);
  expect(out).toMatchObject({ kind: 'outcome', code: 'ok' });
  return input.callId;
}

async function outboxSettled(): Promise<boolean> {
  for (let shard = 0; shard < ks.shards; shard++) {
    const key = keys.outboxForShard(ks, shard);
    const [len, pending] = await Promise.all([redis.xlen(key), redis.xpending(key, RELAY_GROUP).catch(() => [0])]);
    if (len !== 0 || (pending as [number])[0] !== 0) return false;
  }
  return true;
}

const requestsTo = (token: string) => apns.requests.filter((r) => r.token === token);

async function cancel(callId: string, callee: string): Promise<void> {
  const out = await calls.end({
    callId,
    userId: `${callee}-caller`,
    installationId: `${callee}-caller-phone`,
    reason: 'localHangup',
    operationId: `end-${callId}`,
    fingerprint: fingerprint('end', [callId]),
  });
  expect(out).toMatchObject({ kind: 'outcome', code: 'ok' });
}

/** HGETALL commands Redis has run (a call read is one). */
async function hgetalls(): Promise<number> {
  return Number(/cmdstat_hgetall:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0);
}

/** The outbox entries of one call, parsed as the relay parses them. */
async function changesOf(callId: string): Promise<CallChange[]> {
  const shard = shardOf(callId, ks.shards);
  const entries = await redis.xrange(keys.outboxForShard(ks, shard), '-', '+');
  return entries.map(([id, fields]) => parseChange(id, shard, fields)).filter((c) => c.call.callId === callId);
}

describe('relay pushes', () => {
  it('a batch with one failing device retries only that device, as a job of its own', async () => {
    const relay = await startedRelay([pushHandler(dispatcher, IOS_ONLY, { ringTimeoutMs: 45_000 })]);
    try {
      const callee = `u${randomUUID().slice(0, 8)}`;
      const tokens = await iPhones(callee, 3);
      apns.failNext(tokens[1]!, { status: 503, retryAfterSeconds: 1 });
      const callId = await createCall(callee);
      await waitUntil('the retry of the failed device', () => requestsTo(tokens[1]!).length >= 2, 10_000);
      expect(requestsTo(tokens[1]!).map((r) => r.status)).toEqual([503, 200]);
      // Barrier: the retry came after the others were sent, and they were sent once.
      expect(requestsTo(tokens[0]!).map((r) => r.status)).toEqual([200]);
      expect(requestsTo(tokens[2]!).map((r) => r.status)).toEqual([200]);
      for (const t of tokens) {
        expect((requestsTo(t)[0]!.body as { callpayload: { callId: string } }).callpayload.callId).toBe(callId);
      }
      await waitUntil('the retry job done', async () => {
        const counts = await Promise.all(retryQueues.map((q) => q.getJobCounts('waiting', 'delayed', 'active')));
        return counts.every((c) => Object.values(c).every((n) => n === 0));
      });
    } finally {
      await relay.stop();
    }
  });

  it('a fresh invitation is sent from the batch without reading its call, and not at all when the batch also holds its cancel', async () => {
    const handler = pushHandler(dispatcher, IOS_ONLY, { ringTimeoutMs: 45_000 });
    const callee = `u${randomUUID().slice(0, 8)}`;
    const [token] = await iPhones(callee, 1);
    const registrations = new Map([[callee, await redis.hgetall(keys.pushRegistrations(ks, callee)).then((h) => Object.entries(h).flat())]]);
    const noCalls = new Map();

    const rung = await createCall(callee);
    const [created] = await changesOf(rung);
    // Relayed at once: nothing to read; the invitation goes out from the change itself.
    expect([...handler.callsOf!([{ ...created!, atMs: Date.now() }])]).toEqual([]);
    const reads = await hgetalls();
    await handler.handle([{ ...created!, atMs: Date.now() }], { pushRegistrations: registrations, calls: noCalls });
    expect(await hgetalls()).toBe(reads);
    expect(requestsTo(token!).map((r) => (r.body as { callpayload: { callId: string } }).callpayload.callId)).toEqual([rung]);

    const cancelled = await createCall(callee);
    await cancel(cancelled, callee);
    const both = (await changesOf(cancelled)).map((c) => ({ ...c, atMs: Date.now() }));
    expect(both.map((c) => c.kind)).toEqual(['created', 'ended']);
    const skipped = outcomes.get('apns:skipped-not-ringing') ?? 0;
    const readsBefore = await hgetalls();
    await handler.handle(both, { pushRegistrations: registrations, calls: noCalls });
    expect(await hgetalls()).toBe(readsBefore);
    expect(requestsTo(token!)).toHaveLength(1);
    expect(outcomes.get('apns:skipped-not-ringing')).toBe(skipped + 1);
    // Relayed late, the same invitation's call is named for the relay to read.
    expect([...handler.callsOf!([{ ...both[0]!, atMs: Date.now() - 1000 }])]).toEqual([cancelled]);
    // No relay ran: leave no entries for the next test's.
    for (const c of [created!, ...both]) await redis.xdel(keys.outboxForShard(ks, c.shard), c.entryId);
  });

  it('an invitation relayed late has its call read again: a call cancelled meanwhile, its cancel in a later batch, is not pushed', async () => {
    const callee = `u${randomUUID().slice(0, 8)}`;
    const [token] = await iPhones(callee, 1);
    const callId = await createCall(callee);
    await cancel(callId, callee);
    const skipped = outcomes.get('apns:skipped-not-ringing') ?? 0;
    await sleep(200);
    // One entry per batch: the invitation is relayed in a batch without its cancel.
    const relay = await startedRelay([pushHandler(dispatcher, IOS_ONLY, { ringTimeoutMs: 45_000 })], 1);
    try {
      await waitUntil('both changes relayed', () => outboxSettled(), 10_000);
      expect(requestsTo(token!)).toEqual([]);
      expect(outcomes.get('apns:skipped-not-ringing')).toBe(skipped + 1);
    } finally {
      await relay.stop();
    }
  });

  it('a relay retry of a batch (another side effect failed) sends no push twice', async () => {
    let failures = 0;
    // Fails the first two times it sees a batch, after the push handler already sent.
    const flaky: ChangeHandler = {
      name: 'flaky',
      handle: async () => {
        if (failures < 2) {
          failures++;
          throw new Error('side effect failing');
        }
      },
    };
    const relay = await startedRelay([pushHandler(dispatcher, IOS_ONLY, { ringTimeoutMs: 45_000 }), flaky]);
    try {
      const callee = `u${randomUUID().slice(0, 8)}`;
      const tokens = await iPhones(callee, 2);
      // The provider answers the first pushes later than the relay's pause before a retry: the
      // batch fails (flaky) while its pushes are still in flight.
      for (const t of tokens) for (let i = 0; i < 2; i++) apns.failNext(t, { status: 200, delayMs: 600 });
      const callIds = [await createCall(callee), await createCall(callee)];
      await waitUntil('the batches retried until acknowledged', async () => failures >= 2 && (await outboxSettled()), 10_000);
      for (const t of tokens) {
        const sent = requestsTo(t).map((r) => (r.body as { callpayload: { callId: string } }).callpayload.callId);
        expect(sent.sort()).toEqual([...callIds].sort());
      }
      // And the callee's log holds each invitation once, although the batch was delivered again.
      const log = await redis.xrange(keys.eventLog(ks, callee), '-', '+');
      expect(log.map(([, f]) => JSON.parse(f[1]!).callId).sort()).toEqual([...callIds].sort());
    } finally {
      await relay.stop();
    }
  });
});
