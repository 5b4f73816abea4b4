import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import type { Queue, Worker } from 'bullmq';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { createInput } from '../support/fixtures.js';
import { makeApnsKey, startFakeApns, type FakeApns } from '../support/apns-server.js';
import { connectRedis } from '../../src/redis/connection.js';
import { loadScripts } from '../../src/redis/scripts.js';
import { keys, shardOf } from '../../src/redis/keys.js';
import { CallStore, fingerprint } from '../../src/calls/store.js';
import { parseChange, type BatchReads, type CallChange } from '../../src/calls/change.js';
import { PushRegistry } from '../../src/push/registry.js';
import { DAY_MS } from '../../src/calls/retention.js';
import { PushDispatcher, type PushOutcomes } from '../../src/push/dispatcher.js';
import { createPushQueues, type PushRetryJob } from '../../src/push/queues.js';
import { startPushRetryWorkers } from '../../src/push/pushWorker.js';
import { pushHandler } from '../../src/push/relayPushes.js';
import { missedCallClaims } from '../../src/push/missedCallClaims.js';
import { ApnsSender } from '../../src/push/apns.js';
import { Http2Pool } from '../../src/push/http2Pool.js';
import { createLogger } from '../../src/util/logger.js';
import type { MissedCallAlerts } from '../../src/config/pushApps.js';
import { waitUntil } from '../e2e/helpers.js';

/**
 * Missed-call alerts through the relay's push handler and the dispatcher (docs/protocol.md
 * "Missed-call alerts"), with a real Redis and the fake APNs: a change handed to the push handler
 * again (a relay retry, or another worker taking the shard over) sends no second alert; a provider
 * outage is retried within the alert's lifetime and then given up, counted.
 */

const BUNDLE_ID = 'com.example.calls';
const ks = { prefix: 'mca', shards: 4 };
const partitioning = { ...ks, partitions: 1 };
const logger = createLogger('fatal', new Writable({ write: (_c, _e, cb) => cb() }));
/** A short lifetime, so the outage test sees the alert given up. */
const ALERTS: MissedCallAlerts = { ios: true, android: true, lifetimeMs: 4_000, locKey: 'MISSED_CALL' };
let server: RedisServer;
let redis: Redis;
let queueConn: Redis;
let apns: FakeApns;
let pool: Http2Pool;
let calls: CallStore;
let registry: PushRegistry;
let retryQueues: Queue<PushRetryJob>[];
let retryWorkers: Worker<PushRetryJob>[];
let dispatcher: PushDispatcher;
const outcomes: PushOutcomes = new Map();
/** What observeMissed was told: `<platform>:<result>` → count. */
const missed = new Map<string, number>();

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
  registry = new PushRegistry(redis, ks, DAY_MS);
  retryQueues = createPushQueues(queueConn, partitioning);
  dispatcher = new PushDispatcher({
    registry,
    peekCall: (id) => calls.peek(id),
    senders: { apns: apnsSender, missedCallAlerts: ALERTS },
    retryQueues,
    partitioning,
    logger,
    outcomes,
    claimAlerts: missedCallClaims(redis, ks),
    observeMissed: (platform, result) => missed.set(`${platform}:${result}`, (missed.get(`${platform}:${result}`) ?? 0) + 1),
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

const IOS_ONLY = { iosVoip: true, androidPush: false };
const handler = () => pushHandler(dispatcher, IOS_ONLY, { ringTimeoutMs: 45_000, alertsOf: () => ALERTS });
const requestsTo = (token: string) => apns.requests.filter((r) => r.token === token);

/** A callee with one iPhone: its VoIP and its alert token. */
async function iPhone(userId: string): Promise<{ voip: string; alert: string }> {
  const [voip, alert] = [randomBytes(32).toString('hex'), randomBytes(32).toString('hex')];
  for (const [kind, token] of [['iosVoip', voip], ['iosAlert', alert]] as const) {
    await registry.register({ userId, installationId: `${userId}-iphone`, kind, token, appId: BUNDLE_ID, iosEnvironment: 'production' });
  }
  return { voip, alert };
}

/** A call to `callee` that its caller cancelled: the `ended` change, as the relay reads it from the outbox. */
async function cancelledCall(callee: string): Promise<CallChange> {
  const input = createInput(`${callee}-caller`, callee);
  expect(await calls.create(input)).toMatchObject({ kind: 'outcome', code: 'ok' });
  const out = await calls.end({
    callId: input.callId,
    userId: `${callee}-caller`,
    installationId: `${callee}-caller-phone`,
    reason: 'localHangup',
    operationId: `end-${input.callId}`,
    fingerprint: fingerprint('end', [input.callId]),
  });
  expect(out).toMatchObject({ kind: 'outcome', code: 'ok' });
  const shard = shardOf(input.callId, ks.shards);
  const entries = await redis.xrange(keys.outboxForShard(ks, shard), '-', '+');
  const ended = entries.map(([id, fields]) => parseChange(id, shard, fields)).find((c) => c.call.callId === input.callId && c.kind === 'ended');
  expect(ended?.call.state).toBe('ended');
  return ended!;
}

/** What the relay's append script hands the handler: the callee's registrations, as HGETALL returns them. */
async function readsFor(userId: string): Promise<BatchReads> {
  const flat = (await redis.call('HGETALL', keys.pushRegistrations(ks, userId))) as string[];
  return { pushRegistrations: new Map([[userId, flat]]), calls: new Map() };
}

describe('missed-call alerts through the relay handler', () => {
  it('a change handled again (a relay retry, another worker) sends its alert once', async () => {
    const bob = `bob-${randomBytes(4).toString('hex')}`;
    const phone = await iPhone(bob);
    const ended = await cancelledCall(bob);
    const reads = await readsFor(bob);
    const first = handler();
    expect(first.pushRegistrationsOf!([ended])).toEqual([bob]);
    await first.handle([ended], reads);
    // The relay hands the same change over again: once to the same handler, once to another worker's.
    await first.handle([ended], reads);
    await handler().handle([ended], reads);

    const alerts = requestsTo(phone.alert);
    expect(alerts).toHaveLength(1);
    expect(alerts[0]).toMatchObject({ status: 200, headers: { 'apns-push-type': 'alert', 'apns-collapse-id': ended.call.callId } });
    // The VoIP token gets nothing at the end: only an invitation rings it.
    expect(requestsTo(phone.voip)).toEqual([]);
    expect(missed.get('ios:skipped-repeat')).toBeGreaterThanOrEqual(2);
  });

  it('a provider outage is retried within the alert\'s lifetime, then given up and counted', async () => {
    const carol = `carol-${randomBytes(4).toString('hex')}`;
    const phone = await iPhone(carol);
    for (let i = 0; i < 50; i++) apns.failNext(phone.alert, { status: 503 });
    const gaveUpBefore = missed.get('ios:gave-up') ?? 0;
    const ended = await cancelledCall(carol);
    await handler().handle([ended], await readsFor(carol));
    await waitUntil('the alert to be given up', () => (missed.get('ios:gave-up') ?? 0) === gaveUpBefore + 1, 10_000);

    const attempts = requestsTo(phone.alert);
    // The first attempt and at least one retry, all refused; none after the lifetime's end.
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    expect(attempts.every((r) => r.status === 503)).toBe(true);
    const deadlineMs = ended.atMs + ALERTS.lifetimeMs;
    expect(attempts.every((r) => r.receivedAtMs < deadlineMs)).toBe(true);
    expect(outcomes.get('apns:gave-up')).toBeGreaterThanOrEqual(1);
  });
});
