import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { answerCallKeysArgs, CallStore, endCallKeysArgs, fingerprint, parseOutcome, type AnswerInput, type EndInput } from '../../src/calls/store.js';
import { runScript } from '../../src/redis/scripts.js';
import { aliceCallsBob } from '../support/fixtures.js';

/**
 * A request whose operationId binding was new (`firstUse`) skips the script's read of the
 * operation's record (docs/api.md "Idempotency"). A concurrent replay of the same request can still
 * run its script first; these tests put that replay first by running the scripts in that order
 * (the replay with firstUse off, as its binding found the operationId already bound), then check
 * that the first request returns the replay's recorded outcome rather than an outcome of its own.
 */
let server: RedisServer;
let redis: Redis;
let calls: CallStore;

beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url);
  calls = new CallStore(redis, { prefix: 'cb', shards: 8, ringTimeoutMs: 45_000, retentionMs: 60_000, operationTtlMs: 86_400_000, callWaiting: false, maxRenamesPerCall: 10 });
});
afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

let callId: string;
beforeEach(async () => {
  callId = randomUUID();
  const created = await calls.create(aliceCallsBob(callId, randomUUID()));
  expect(created).toMatchObject({ kind: 'outcome', status: 201 });
});

function answerInput(expectedRevision?: string): AnswerInput {
  return { callId, userId: 'bob', installationId: 'bob-phone', expectedRevision, operationId: randomUUID(), fingerprint: fingerprint('answer', [callId, 'bob-phone', expectedRevision ?? null]) };
}
function endInput(userId: string, installationId: string, reason: EndInput['reason']): EndInput {
  return { callId, userId, installationId, reason, operationId: randomUUID(), fingerprint: fingerprint('end', [callId, reason]) };
}
async function answerScript(i: AnswerInput, firstUse: boolean) {
  const c = answerCallKeysArgs(calls.settings, i, firstUse);
  return parseOutcome(await runScript(redis, 'answerCall', c.keys, c.args));
}
async function endScript(i: EndInput, firstUse: boolean) {
  const c = endCallKeysArgs(calls.settings, i, firstUse);
  return parseOutcome(await runScript(redis, 'endCall', c.keys, c.args));
}
/** GETs Redis ran so far. */
async function getCalls(): Promise<number> {
  return Number(/cmdstat_get:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0);
}
/** The script's one read of the call (its key is one string, lua/includes/callRead.lua): the GET a request without a record read makes. */
const CALL_READ = 1;
const ended = () => calls.end(endInput('alice', 'alice-phone', 'localHangup'));

describe('operation records on a first use', () => {
  it('an answer that wins reads no record', async () => {
    const before = await getCalls();
    expect(await answerScript(answerInput(), true)).toMatchObject({ kind: 'outcome', code: 'ok', replayed: false, call: { state: 'accepted' } });
    expect(await getCalls()).toBe(before + CALL_READ);
  });

  it('answer: a replay that won first, then the end → the first request gets the recorded 200, not a conflict', async () => {
    const op = answerInput();
    const replay = await answerScript(op, false);
    expect(replay).toMatchObject({ code: 'ok', status: 200, call: { state: 'accepted', revision: '2' } });
    await ended();
    const first = await answerScript(op, true);
    expect(first).toEqual({ ...replay, replayed: true });
  });

  it('answer: a replay refused with revision_conflict, then a rename makes the revision match → still the recorded 409; the call keeps ringing', async () => {
    const op = answerInput('2');
    const replay = await answerScript(op, false);
    expect(replay).toMatchObject({ code: 'revision_conflict', status: 409, call: { revision: '1' } });
    const renamed = await calls.rename({ callId, userId: 'alice', displayName: 'Alice B', operationId: randomUUID(), fingerprint: 'rename-fp' });
    expect(renamed).toMatchObject({ code: 'ok', call: { revision: '2' } });
    const first = await answerScript(op, true);
    expect(first).toEqual({ ...replay, replayed: true });
    expect(await calls.read(callId, 'bob')).toMatchObject({ call: { state: 'ringing', revision: '2' } });
  });

  it('end: an echo recorded on the ringing call, then the answer → the first request gets the ringing snapshot it recorded', async () => {
    const op = endInput('bob', 'bob-phone', 'remoteEnded');
    const replay = await endScript(op, false);
    expect(replay).toMatchObject({ code: 'ok', call: { state: 'ringing' } });
    await calls.answer(answerInput());
    const first = await endScript(op, true);
    expect(first).toEqual({ ...replay, replayed: true });
  });

  it('end: a replay that ended the call → the first request gets that end, byte for byte, and the call ends once', async () => {
    const op = endInput('alice', 'alice-phone', 'localHangup');
    const replay = await endScript(op, false);
    expect(replay).toMatchObject({ code: 'ok', call: { state: 'ended', endReason: 'localHangup', revision: '2' } });
    const first = await endScript(op, true);
    expect(first).toEqual({ ...replay, replayed: true });
    expect(await calls.read(callId, 'alice')).toMatchObject({ call: { revision: '2' } });
  });

  it('end: a first use that ends the call reads no record', async () => {
    const before = await getCalls();
    expect(await endScript(endInput('bob', 'bob-phone', 'localHangup'), true)).toMatchObject({ code: 'ok', replayed: false, call: { state: 'ended', endReason: 'declined' } });
    expect(await getCalls()).toBe(before + CALL_READ);
  });
});
