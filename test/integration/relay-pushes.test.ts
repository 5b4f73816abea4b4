import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import type { Queue, Worker } from 'bullmq';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { relayBlockingConnection } from '../support/fixtures.js';
import { makeApnsKey, startFakeApns, type FakeApns } from '../support/apns-server.js';
import { connectRedis } from '../../src/redis/connection.js';
import { loadScripts } from '../../src/redis/scripts.js';
import { keys } from '../../src/redis/keys.js';
import { CallStore, fingerprint } from '../../src/calls/store.js';
import { EventLog } from '../../src/events/eventLog.js';
import { OutboxRelay, RELAY_GROUP } from '../../src/events/relay.js';
import type { ChangeHandler } from '../../src/events/change.js';
import { PushRegistry } from '../../src/push/registry.js';
import { PushDispatcher, type PushOutcomes } from '../../src/push/dispatcher.js';
import { createPushQueues, type PushRetryJob } from '../../src/push/queues.js';
import { startPushRetryWorkers } from '../../src/push/pushWorker.js';
import { pushHandler } from '../../src/push/relayPushes.js';
import { ApnsSender } from '../../src/push/apns.js';
import { Http2Pool } from '../../src/push/http2Pool.js';
import { createLogger } from '../../src/util/logger.js';
import { waitUntil } from '../e2e/helpers.js';

/**
 * Pushes sent by the relay (README "Push"): the first attempt goes out right after the events are
 * stored; only failed messages become a BullMQ retry job, and a batch the relay retries (another
 * side effect failed) sends none of its pushes again.
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
  redis = connectRedis(server.url, 'commands', 'test');
  queueConn = connectRedis(server.url, 'queues', 'test-queues');
  await redis.connect();
  await loadScripts(redis);
  const key = makeApnsKey();
  apns = await startFakeApns({ bundleId: BUNDLE_ID, keyId: key.keyId, teamId: key.teamId, publicKey: key.publicKey });
  pool = new Http2Pool();
  const apnsSender = new ApnsSender({ productionUrl: apns.url, keyPem: key.privateKeyPem, keyId: key.keyId, teamId: key.teamId, bundleId: BUNDLE_ID, pool });
  calls = new CallStore(redis, { ...ks, ringTimeoutMs: 45_000, retentionMs: 60_000, operationTtlMs: 60_000, callWaiting: true, maxRenamesPerCall: 10 });
  registry = new PushRegistry(redis, ks);
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
  const callId = randomUUID();
  const out = await calls.create({
    callId,
    callerUserId: `${callee}-caller`,
    callerInstallationId: 'caller-phone',
    callerDisplayName: 'Caller',
    callerHandle: 'app:caller',
    calleeUserId: callee,
    video: false,
    operationId: `op-${callId}`,
    fingerprint: fingerprint('create', [callId]),
  });
  expect(out).toMatchObject({ kind: 'outcome', code: 'ok' });
  return callId;
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

describe('relay pushes', () => {
  it('a batch with one failing device retries only that device, as a job of its own', async () => {
    const enabled = { iosVoip: true, androidPush: false };
    const relay = new OutboxRelay(redis, blockingConnection, eventLog, [pushHandler(dispatcher, enabled)], logger, {
      ...ks,
      batchSize: 64,
      blockMs: 100,
      leaseMs: 3000,
    });
    await relay.start();
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
    const enabled = { iosVoip: true, androidPush: false };
    const relay = new OutboxRelay(
      redis,
      blockingConnection,
      eventLog,
      [pushHandler(dispatcher, enabled), flaky],
      logger,
      { ...ks, batchSize: 64, blockMs: 100, leaseMs: 3000 },
    );
    await relay.start();
    try {
      const callee = `u${randomUUID().slice(0, 8)}`;
      const tokens = await iPhones(callee, 2);
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
