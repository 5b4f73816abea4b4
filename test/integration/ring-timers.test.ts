import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_REDIS_COMMAND_TIMEOUT_MS } from '../support/server.js';
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { connectRedis } from '../../src/redis/connection.js';
import { loadScripts } from '../../src/redis/scripts.js';
import { keys, shardOf } from '../../src/redis/keys.js';
import { CallStore, fingerprint, type StoreSettings } from '../../src/calls/store.js';
import { sweepShards, SweepSchedule } from '../../src/timers/ringSweep.js';
import { parseChange } from '../../src/calls/change.js';
import { createInput, sleep } from '../support/fixtures.js';
import { storedCallFields } from '../support/callRecords.js';

/**
 * Ring timers (docs/architecture.md "Ring timers"): the call scripts keep each shard's ring index, and sweeps end
 * due calls with a compare-and-delete, so racing sweepers, or a sweeper and an answer, change a
 * call exactly once.
 */

const ks = { prefix: 'rt', shards: 4 };
let server: RedisServer;
let a: Redis;
let b: Redis;

beforeAll(async () => {
  server = await startRedis();
  a = connectRedis(server.url, 'commands', 'test-a', TEST_REDIS_COMMAND_TIMEOUT_MS);
  b = connectRedis(server.url, 'commands', 'test-b', TEST_REDIS_COMMAND_TIMEOUT_MS);
  await Promise.all([a.connect(), b.connect()]);
  await loadScripts(a);
});
afterAll(async () => {
  a?.disconnect();
  b?.disconnect();
  await server?.stop();
});

const settings = (ringTimeoutMs: number): StoreSettings => ({ ...ks, ringTimeoutMs, retentionMs: 60_000, operationTtlMs: 60_000, callWaiting: true, maxRenamesPerCall: 10 });
const sweep = { ...ks, retentionMs: 60_000, pageSize: 7 };
const allShards = Array.from({ length: ks.shards }, (_, i) => i);

async function create(store: CallStore, caller = `u${randomUUID().slice(0, 6)}`): Promise<{ callId: string; expiresAtMs: number }> {
  const input = createInput(caller);
  const out = await store.create(input);
  if (out.kind !== 'outcome') throw new Error(`create failed: ${out.kind}`);
  return { callId: input.callId, expiresAtMs: out.call.expiresAtMs };
}

function answer(store: CallStore, callId: string, caller: string) {
  return store.answer({
    callId,
    userId: `${caller}-callee`,
    installationId: 'callee-phone',
    expectedRevision: undefined,
    operationId: `a-${callId}`,
    fingerprint: fingerprint('answer', [callId]),
  });
}

/** Every change the outbox holds for a call, in order. */
async function changesOf(callId: string): Promise<string[]> {
  const shardKey = keys.outboxForCall(ks, callId);
  const entries = (await a.xrange(shardKey, '-', '+')) as [string, string[]][];
  return entries.map(([id, fields]) => parseChange(id, 0, fields)).filter((c) => c.call.callId === callId).map((c) => `${c.kind}:${c.call.endReason ?? ''}`);
}

describe('ring index', () => {
  it('a ringing call is indexed by its expiresAtMs; answering or cancelling takes it out', async () => {
    const store = new CallStore(a, settings(45_000));
    const caller = 'idx';
    const answered = await create(store, caller);
    const cancelled = await create(store, caller);
    for (const c of [answered, cancelled]) expect(await a.zscore(keys.ringingForCall(ks, c.callId), c.callId)).toBe(String(c.expiresAtMs));

    expect(await answer(store, answered.callId, caller)).toMatchObject({ kind: 'outcome', code: 'ok' });
    const ended = await store.end({
      callId: cancelled.callId,
      userId: caller,
      installationId: `${caller}-phone`,
      reason: 'localHangup',
      operationId: `e-${cancelled.callId}`,
      fingerprint: fingerprint('end', [cancelled.callId]),
    });
    expect(ended).toMatchObject({ kind: 'outcome', call: { state: 'ended', endReason: 'localHangup' } });
    for (const c of [answered, cancelled]) expect(await a.zscore(keys.ringingForCall(ks, c.callId), c.callId)).toBeNull();
  });
});

describe('ring sweeps', () => {
  it('two sweepers racing over the same due calls end each call exactly once', async () => {
    const store = new CallStore(a, settings(300));
    const calls = await Promise.all(Array.from({ length: 40 }, () => create(store)));
    await sleep(450);
    // Both read the same due entries and race to end them (separate connections, pages of 7).
    const farFuture = Date.now() + 60_000;
    const [r1, r2] = await Promise.all([sweepShards(a, sweep, allShards, farFuture), sweepShards(b, sweep, allShards, farFuture)]);
    expect(r1.ended + r2.ended).toBe(calls.length);
    for (const late of [...r1.lateMs, ...r2.lateMs]) expect(late).toBeGreaterThanOrEqual(0);
    for (const { callId } of calls) {
      expect(await changesOf(callId)).toEqual(['created:', 'ended:unanswered']);
      expect((await storedCallFields(a, keys.call(ks, callId))).revision).toBe('2');
      expect(await a.zscore(keys.ringingForCall(ks, callId), callId)).toBeNull();
    }
    // Nothing left to do: a third sweep ends nothing.
    expect((await sweepShards(a, sweep, allShards, farFuture)).ended).toBe(0);
  });

  it('a sweep that runs early (its clock ahead of Redis) ends nothing before the deadline', async () => {
    const store = new CallStore(a, settings(5_000));
    const { callId } = await create(store);
    const r = await sweepShards(a, sweep, allShards, Date.now() + 60_000);
    expect(r.ended).toBe(0);
    expect(await changesOf(callId)).toEqual(['created:']);
    expect(await a.zscore(keys.ringingForCall(ks, callId), callId)).not.toBeNull();
  });

  it('an answer racing its own deadline has exactly one outcome', async () => {
    const store = new CallStore(a, settings(250));
    const answerStore = new CallStore(b, settings(250));
    const outcomes = { answered: 0, unanswered: 0 };
    for (let round = 0; round < 4; round++) {
      const caller = `race${round}`;
      const calls = await Promise.all(Array.from({ length: 10 }, () => create(store, caller)));
      // Fire the sweeps and the answers around the deadline, interleaved.
      await sleep(Math.max(0, calls[0]!.expiresAtMs - Date.now() - 5));
      const answers = calls.map((c, i) => sleep(i % 4).then(() => answer(answerStore, c.callId, caller)));
      const sweeps = [0, 3, 6, 9].map((d) => sleep(d).then(() => sweepShards(a, sweep, allShards, Date.now() + 60_000)));
      const [answerResults] = await Promise.all([Promise.all(answers), Promise.all(sweeps)]);
      for (const [i, { callId }] of calls.entries()) {
        const changes = await changesOf(callId);
        const res = answerResults[i]!;
        if (res.kind !== 'outcome') throw new Error(`answer failed: ${res.code}`);
        if (res.code === 'ok') {
          outcomes.answered++;
          expect(changes).toEqual(['created:', 'answered:']);
          expect(res.call.state).toBe('accepted');
        } else {
          outcomes.unanswered++;
          expect(res.code).toBe('answer_conflict');
          expect(changes).toEqual(['created:', 'ended:unanswered']);
        }
        expect(await a.zscore(keys.ringingForCall(ks, callId), callId)).toBeNull();
      }
    }
    expect(outcomes.answered + outcomes.unanswered).toBe(40);
  });

  it('with a schedule, an idle shard is read again only at its earliest deadline or after maxIdleMs, and a call indexed meanwhile still ends', async () => {
    const ks2 = { prefix: `sched-${randomUUID().slice(0, 6)}`, shards: 2 };
    const shards2 = [0, 1];
    const sweep2 = { ...ks2, retentionMs: 60_000, pageSize: 7 };
    const store = new CallStore(a, { ...settings(1000), ...ks2 });
    const schedule = new SweepSchedule(400);
    const reads = async () => Number(/cmdstat_zrange:calls=(\d+)/.exec(await a.info('commandstats'))?.[1] ?? 0);
    const readsDuring = async (redisNowMs: number) => {
      const before = await reads();
      const r = await sweepShards(a, sweep2, shards2, redisNowMs, schedule);
      return { reads: (await reads()) - before, ended: r.ended };
    };

    const t0 = Date.now();
    // First look: each shard's due calls and earliest deadline, in one write.
    expect(await readsDuring(t0)).toEqual({ reads: 4, ended: 0 });
    // Idle shards wait maxIdleMs.
    expect(await readsDuring(t0 + 399)).toEqual({ reads: 0, ended: 0 });
    const { callId, expiresAtMs } = await create(store);
    expect(expiresAtMs).toBeGreaterThanOrEqual(t0 + 1000);
    expect(await readsDuring(t0 + 400)).toEqual({ reads: 4, ended: 0 });
    expect(await readsDuring(t0 + 799)).toEqual({ reads: 0, ended: 0 });
    expect(await readsDuring(t0 + 800)).toEqual({ reads: 4, ended: 0 });
    // The call's shard now waits for its deadline (the other, idle, until t0 + 1200).
    const callShard = shardOf(callId, ks2.shards);
    expect(schedule.due(callShard, expiresAtMs - 1)).toBe(false);
    expect(schedule.due(callShard, expiresAtMs)).toBe(true);
    expect(await readsDuring(Math.min(expiresAtMs - 1, t0 + 1199))).toEqual({ reads: 0, ended: 0 });
    // Once Redis's clock has passed the deadline, the look at it ends the call.
    await sleep(Math.max(0, expiresAtMs - Date.now() + 20));
    expect((await readsDuring(expiresAtMs)).ended).toBe(1);
    const entries = (await a.xrange(keys.outboxForCall(ks2, callId), '-', '+')) as [string, string[]][];
    expect(entries.map(([id, f]) => parseChange(id, 0, f)).map((c) => `${c.kind}:${c.call.endReason ?? ''}`)).toEqual(['created:', 'ended:unanswered']);
  });
});
