import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_REDIS_COMMAND_TIMEOUT_MS } from '../support/server.js';
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
import { MissedCallSeen } from '../../src/push/missedCallSeen.js';
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
/** The same dispatcher with a grace (MISSED_CALL_ALERT_GRACE_MS): its delayed jobs are run by `dispatcher`'s workers. */
let graced: PushDispatcher;
let seenMarks: MissedCallSeen;
const GRACE_MS = 800;
const outcomes: PushOutcomes = new Map();
/** What observeMissed was told: `<platform>:<result>` → count. */
const missed = new Map<string, number>();

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
  retryQueues = createPushQueues(queueConn, partitioning);
  seenMarks = new MissedCallSeen(redis, { ...ks, ringTimeoutMs: 45_000, alertGraceMs: GRACE_MS }, logger);
  const deps = {
    registry,
    peekCall: (id: string) => calls.peek(id),
    senders: { apns: apnsSender, missedCallAlerts: ALERTS },
    retryQueues,
    partitioning,
    logger,
    outcomes,
    claimAlerts: missedCallClaims(redis, ks),
    alertMarks: seenMarks.marks.bind(seenMarks),
    observeMissed: (platform: 'ios' | 'android', result: string) => missed.set(`${platform}:${result}`, (missed.get(`${platform}:${result}`) ?? 0) + 1),
  };
  dispatcher = new PushDispatcher(deps);
  graced = new PushDispatcher({ ...deps, alertGraceMs: GRACE_MS });
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
const handler = (d = dispatcher) => pushHandler(d, IOS_ONLY, { ringTimeoutMs: 45_000, alertsOf: () => ALERTS });
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

describe('an installation that rang and saw the end on its socket (docs/protocol.md "Missed-call alerts")', () => {
  const phoneOf = (user: string) => `${user}-iphone`;
  const seenCount = () => missed.get('ios:skipped-seen') ?? 0;

  it('rang, end not seen yet when relayed: the alert waits the grace, and is skipped when the mark comes meanwhile', async () => {
    const bob = `bob-${randomBytes(4).toString('hex')}`;
    const phone = await iPhone(bob);
    const ended = await cancelledCall(bob);
    await seenMarks.noteRang(bob, ended.call.callId, phoneOf(bob));
    const before = seenCount();
    const startedMs = Date.now();
    await handler(graced).handle([ended], await readsFor(bob));
    // Relayed: the alert waits in a delayed job, not sent.
    expect(requestsTo(phone.alert)).toEqual([]);
    expect(await retryQueues[0]!.getDelayedCount()).toBe(1);
    seenMarks.noteEndSeen(bob, ended.call.callId, phoneOf(bob), ended.call.revision);
    await waitUntil('the graced attempt to skip it', () => seenCount() === before + 1, 10_000);
    expect(Date.now() - startedMs).toBeGreaterThanOrEqual(GRACE_MS - 50);
    expect(requestsTo(phone.alert)).toEqual([]);
    // Nothing claimed: a skipped alert leaves no claim.
    expect(await redis.exists(keys.missedCallAlertClaim(ks, bob, ended.call.callId, phoneOf(bob), 'iosAlert'))).toBe(0);
  });

  it('rang, and no mark comes: the alert goes after the grace', async () => {
    const carol = `carol-${randomBytes(4).toString('hex')}`;
    const phone = await iPhone(carol);
    const ended = await cancelledCall(carol);
    await seenMarks.noteRang(carol, ended.call.callId, phoneOf(carol));
    const startedMs = Date.now();
    await handler(graced).handle([ended], await readsFor(carol));
    expect(requestsTo(phone.alert)).toEqual([]);
    await waitUntil('the alert after the grace', () => requestsTo(phone.alert).length === 1, 10_000);
    expect(requestsTo(phone.alert)[0]!.receivedAtMs - startedMs).toBeGreaterThanOrEqual(GRACE_MS - 50);
    expect(requestsTo(phone.alert)[0]!.status).toBe(200);
  });

  it('rang and already seen when relayed: skipped at once, no job; an end of another revision does not count', async () => {
    const dave = `dave-${randomBytes(4).toString('hex')}`;
    const phone = await iPhone(dave);
    const ended = await cancelledCall(dave);
    await seenMarks.noteRang(dave, ended.call.callId, phoneOf(dave));
    // An earlier end of the member's part (another revision) is not the one that made it miss the call.
    seenMarks.noteEndSeen(dave, ended.call.callId, phoneOf(dave), '1');
    await waitUntil('the mark', async () => (await redis.get(keys.missedCallEndSeen(ks, dave, ended.call.callId, phoneOf(dave)))) === '1');
    expect((await seenMarks.marks([{ t: 'missed', callId: ended.call.callId, userId: dave, installationId: phoneOf(dave), kind: 'iosAlert', payload: { revision: ended.call.revision } as never, deadlineMs: 0 }]))[0]).toBe('rang');
    seenMarks.noteEndSeen(dave, ended.call.callId, phoneOf(dave), ended.call.revision);
    await waitUntil('the mark', async () => (await redis.get(keys.missedCallEndSeen(ks, dave, ended.call.callId, phoneOf(dave)))) === ended.call.revision);
    const before = seenCount();
    await handler(graced).handle([ended], await readsFor(dave));
    expect(seenCount()).toBe(before + 1);
    expect(await retryQueues[0]!.getDelayedCount()).toBe(0);
    expect(requestsTo(phone.alert)).toEqual([]);
  });

  it('never rang: the alert goes at once, without the grace, though its socket saw the end', async () => {
    const erin = `erin-${randomBytes(4).toString('hex')}`;
    const phone = await iPhone(erin);
    const ended = await cancelledCall(erin);
    seenMarks.noteEndSeen(erin, ended.call.callId, phoneOf(erin), ended.call.revision);
    await waitUntil('the mark', async () => (await redis.exists(keys.missedCallEndSeen(ks, erin, ended.call.callId, phoneOf(erin)))) === 1);
    await handler(graced).handle([ended], await readsFor(erin));
    // Sent by the relay's own attempt: answered before handle() resolved.
    expect(requestsTo(phone.alert).map((r) => r.status)).toEqual([200]);
    expect(await retryQueues[0]!.getDelayedCount()).toBe(0);
  });
});
