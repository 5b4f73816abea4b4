import { beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { answerCallKeysArgs, CallStore, fingerprint, parseOutcome } from '../../src/calls/store.js';
import { keys } from '../../src/redis/keys.js';
import { runScript } from '../../src/redis/scripts.js';
import { aliceCallsBob, fileRedis } from '../support/fixtures.js';

/**
 * A live signal's recipients come from the call's signal view while the head of the call's record
 * (through its createdAtMs) is unchanged (lua/includes/presence.lua signalSender). These run
 * lua/sendSignal.lua itself on a real Redis, in its cluster form (no notice channel), whose reply
 * names the recipients, and check that the view follows the call: a new answer, and a new call
 * under the same callId once the old record is gone, whose head matches the old one's through
 * its revision.
 */
const db = fileRedis();
let calls: CallStore;
beforeAll(() => {
  calls = new CallStore(db.redis, { prefix: 'cb', shards: 8, ringTimeoutMs: 45_000, retentionMs: 60_000, operationTtlMs: 86_400_000, callWaiting: false, maxRenamesPerCall: 10 });
});

/** Alice's signal on the call: the script's reply (`sent`, count, recipients as `userId\tinstallationId…`). */
async function aliceSignals(callId: string, viewTtlMs = 600_000): Promise<unknown[]> {
  const ks = calls.settings;
  return (await runScript(db.redis, 'sendSignal', [keys.call(ks, callId), keys.callPresence(ks, callId), keys.callSignalLimit(ks, callId), keys.callSignalView(ks, callId)], {
    userId: 'alice',
    installationId: 'alice-phone',
    kind: 'custom',
    state: '',
    signalJson: '{}',
    noticeChannel: '',
    limit: '0',
    windowMs: '1000',
    presenceTtlMs: '60000',
    viewTtlMs: String(viewTtlMs),
  })) as unknown[];
}

async function bobAnswers(callId: string, installationId: string): Promise<void> {
  const c = answerCallKeysArgs(calls.settings, { callId, userId: 'bob', installationId, expectedRevision: undefined, operationId: randomUUID(), fingerprint: fingerprint('answer', [callId, installationId, null]) }, true);
  expect(parseOutcome(await runScript(db.redis, 'answerCall', c.keys, c.args))).toMatchObject({ kind: 'outcome', status: 200 });
}

async function aliceCallsBobAgain(callId: string): Promise<void> {
  expect(await calls.create(aliceCallsBob(callId, randomUUID()))).toMatchObject({ kind: 'outcome', status: 201 });
}

describe('the signal view', () => {
  it('follows an answer: ringing, Alice signals nobody; answered, Bob’s answering installation', async () => {
    const callId = randomUUID();
    await aliceCallsBobAgain(callId);
    expect(await aliceSignals(callId)).toEqual(['sent', 0, '']);
    await bobAnswers(callId, 'bob-phone');
    expect(await aliceSignals(callId)).toEqual(['sent', 1, 'bob\tbob-phone']);
    // Its head is the record's first bytes, through createdAtMs, not the whole record.
    const head = await db.redis.hget(keys.callSignalView(calls.settings, callId), 'head');
    const record = await db.redis.get(keys.call(calls.settings, callId));
    expect(record!.startsWith(head!)).toBe(true);
    expect(head).toMatch(/"createdAtMs","\d+"$/);
    expect(head!.length).toBeLessThan(record!.length);
  });

  it('tells a later call under the same callId from the one it was made for, though their heads match through the revision', async () => {
    const callId = randomUUID();
    await aliceCallsBobAgain(callId);
    await bobAnswers(callId, 'bob-phone');
    expect(await aliceSignals(callId)).toEqual(['sent', 1, 'bob\tbob-phone']);
    // The record is gone (its retention over) while the view lives on; the callId is used again
    // and answered from Bob's other installation: the same state, revision and parties.
    await db.redis.del(keys.call(calls.settings, callId));
    await new Promise((r) => setTimeout(r, 5)); // another createdAtMs
    await aliceCallsBobAgain(callId);
    await bobAnswers(callId, 'bob-tablet');
    expect(await aliceSignals(callId)).toEqual(['sent', 1, 'bob\tbob-tablet']);
  });

  it('outlives its view: once the view expires, the next signal makes it again and reaches the same recipient', async () => {
    const callId = randomUUID();
    await aliceCallsBobAgain(callId);
    await bobAnswers(callId, 'bob-phone');
    const view = keys.callSignalView(calls.settings, callId);
    expect(await aliceSignals(callId, 50)).toEqual(['sent', 1, 'bob\tbob-phone']);
    await new Promise((r) => setTimeout(r, 120));
    expect(await db.redis.exists(view)).toBe(0);
    expect(await aliceSignals(callId, 50)).toEqual(['sent', 1, 'bob\tbob-phone']);
    expect(await db.redis.exists(view)).toBe(1);
  });

  it('answers from the view while the call is unchanged: the record is read whole only to make it', async () => {
    const callId = randomUUID();
    await aliceCallsBobAgain(callId);
    await bobAnswers(callId, 'bob-phone');
    await aliceSignals(callId);
    const gets = async () => Number(/cmdstat_get:calls=(\d+)/.exec(await db.redis.info('commandstats'))?.[1] ?? 0);
    const before = await gets();
    for (let i = 0; i < 5; i++) expect(await aliceSignals(callId)).toEqual(['sent', 1, 'bob\tbob-phone']);
    expect(await gets()).toBe(before);
  });
});
