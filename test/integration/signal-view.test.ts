import { beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { answerCallKeysArgs, CallStore, fingerprint, parseOutcome } from '../../src/calls/store.js';
import { keys } from '../../src/redis/keys.js';
import { runScript } from '../../src/redis/scripts.js';
import { SignalSender, signalsScriptCall } from '../../src/gateway/signals.js';
import { parseSignalNotice } from '../../src/gateway/signalNotice.js';
import { aliceCallsBob, fileRedis } from '../support/fixtures.js';
import { sleep } from '../support/wait.js';

/**
 * A live signal's recipients come from the call's signal view while the head of the call's record
 * (through its createdAtMs) is unchanged (lua/includes/presence.lua signalSender). These run
 * lua/sendSignals.lua itself on a real Redis, in its cluster form (no notice channel), whose reply
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
  const call = signalsScriptCall(ks, [{ userId: 'alice', installationId: 'alice-phone', callId, kind: 'custom', state: '', signalJson: '{}' }], { noticeChannel: '', limit: 0, viewTtlMs });
  return ((await runScript(db.redis, 'sendSignals', call.keys, call.args)) as unknown[][])[0]!;
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
    await sleep(5); // another createdAtMs
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
    await sleep(120);
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

/**
 * The signals a gateway receives in one turn share one script run and, on a single Redis, one
 * publication on an early channel (src/gateway/signals.ts SignalSender, src/gateway/signalNotice.ts),
 * each signal checked, counted and kept in turn.
 */
describe("a turn's signals", () => {
  const checked = (callId: string, kind: string, value: unknown) => ({ signal: { callId, kind, value }, valueJson: JSON.stringify(value) });

  /** Every early channel's messages, from now on. */
  async function earlyMessages(): Promise<{ messages: string[]; stop: () => void }> {
    const sub = db.redis.duplicate();
    const messages: string[] = [];
    sub.on('smessage', (_channel: string, message: string) => messages.push(message));
    for (let shard = 0; shard < calls.settings.shards; shard++) await sub.ssubscribe(keys.earlyChannel(calls.settings, shard));
    return { messages, stop: () => sub.disconnect() };
  }

  /** A call of Alice's that Bob answered from bob-phone. */
  async function answeredCall(): Promise<string> {
    const callId = randomUUID();
    await aliceCallsBobAgain(callId);
    await bobAnswers(callId, 'bob-phone');
    return callId;
  }

  /** A sender with the script loaded, on an answered call. */
  async function warmSender(): Promise<{ callId: string; sender: SignalSender }> {
    const callId = await answeredCall();
    const sender = new SignalSender(db.redis, calls.settings, 0);
    await sender.send('alice', 'alice-phone', checked(callId, 'reaction', 'warm-up'));
    return { callId, sender };
  }

  const scriptRuns = async () => Number(/cmdstat_evalsha:calls=(\d+)/.exec(await db.redis.info('commandstats'))?.[1] ?? 0);

  it('share one script run and one publication, each checked in order; a signal alone goes in the one-signal form', async () => {
    const [first, second] = [randomUUID(), randomUUID()];
    for (const callId of [first, second]) {
      await aliceCallsBobAgain(callId);
      await bobAnswers(callId, 'bob-phone');
    }
    const sender = new SignalSender(db.redis, calls.settings, 0);
    const early = await earlyMessages();
    try {
      await sender.send('alice', 'alice-phone', checked(first, 'reaction', 'warm-up')); // the script is loaded
      await waitFor(() => early.messages.length === 1);
      const runs = await scriptRuns();
      const outcomes = await Promise.all([
        sender.send('alice', 'alice-phone', checked(first, 'muted', true)),
        sender.send('alice', 'alice-phone', checked(second, 'reaction', 'a')),
        sender.send('alice', 'alice-phone', checked(first, 'muted', true)),
        sender.send('mallory', 'mallory-phone', checked(first, 'reaction', 'x')),
        sender.send('alice', 'alice-tablet', checked(first, 'reaction', 'x')),
        sender.send('alice', 'alice-phone', checked(first, 'reaction', 'b')),
      ]);
      expect(outcomes).toEqual([
        { kind: 'sent', recipients: 1 },
        { kind: 'sent', recipients: 1 },
        { kind: 'same' },
        { kind: 'refused', reason: 'not_joined' },
        { kind: 'refused', reason: 'not_joined' },
        { kind: 'sent', recipients: 1 },
      ]);
      expect(await scriptRuns()).toBe(runs + 1);
      await waitFor(() => early.messages.length === 2);
      const batch = early.messages[1]!;
      expect(batch.startsWith('!signalbatch\n')).toBe(true);
      const notices = parseSignalNotice(batch);
      expect(notices.map((n) => n.recipients)).toEqual(['bob\tbob-phone', 'bob\tbob-phone', 'bob\tbob-phone']);
      expect(notices.map((n) => JSON.parse(n.json) as Record<string, unknown>)).toEqual([
        { callId: first, userId: 'alice', kind: 'muted', value: true, atMs: expect.any(Number) },
        { callId: second, userId: 'alice', kind: 'reaction', value: 'a', atMs: expect.any(Number) },
        { callId: first, userId: 'alice', kind: 'reaction', value: 'b', atMs: expect.any(Number) },
      ]);
      // The warm-up went alone: the form a gateway of the previous version reads.
      expect(early.messages[0]!.startsWith('!signals\n')).toBe(true);
      expect(parseSignalNotice(early.messages[0]!)).toEqual([{ recipients: 'bob\tbob-phone', json: expect.stringContaining('"warm-up"') }]);
    } finally {
      early.stop();
    }
  });

  it('sent while a run is in flight wait for it, then go in one run, in order', async () => {
    const { callId, sender } = await warmSender();
    const early = await earlyMessages();
    const runs = await scriptRuns();
    const admin = db.redis.duplicate();
    try {
      // Redis holds every command for 300 ms: the first run stays in flight over the next turns.
      await admin.client('PAUSE', 300, 'ALL');
      const sent = [sender.send('alice', 'alice-phone', checked(callId, 'reaction', 'r0'))];
      for (let i = 1; i <= 3; i++) {
        await sleep(20);
        sent.push(sender.send('alice', 'alice-phone', checked(callId, 'reaction', `r${i}`)));
      }
      expect(await Promise.all(sent)).toEqual(Array(4).fill({ kind: 'sent', recipients: 1 }));
    } finally {
      admin.disconnect();
    }
    expect(await scriptRuns()).toBe(runs + 2);
    await waitFor(() => early.messages.length === 2);
    expect(early.messages.flatMap((m) => parseSignalNotice(m)).map((n) => (JSON.parse(n.json) as { value: string }).value)).toEqual(['r0', 'r1', 'r2', 'r3']);
    early.stop();
  });

  it('past 4,096 waiting for Redis, a signal is refused at once; those waiting go, 128 a run', async () => {
    const { callId, sender } = await warmSender();
    const runs = await scriptRuns();
    const sent = Array.from({ length: 4096 }, (_, i) => sender.send('alice', 'alice-phone', checked(callId, 'reaction', `r${i}`)));
    await expect(sender.send('alice', 'alice-phone', checked(callId, 'reaction', 'one too many'))).rejects.toThrow('too many signals waiting for Redis');
    const outcomes = await Promise.all(sent);
    expect(outcomes.every((o) => o.kind === 'sent')).toBe(true);
    expect(await scriptRuns()).toBe(runs + 4096 / 128);
  });

  it("count toward the call's limit in order: within one turn, those past it are limited", async () => {
    const callId = await answeredCall();
    const sender = new SignalSender(db.redis, calls.settings, 2);
    const outcomes = await Promise.all(['a', 'b', 'c', 'd'].map((r) => sender.send('alice', 'alice-phone', checked(callId, 'reaction', r))));
    expect(outcomes.map((o) => o.kind)).toEqual(['sent', 'sent', 'limited', 'limited']);
  });
});

async function waitFor(ok: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !ok(); i++) await sleep(10);
  expect(ok()).toBe(true);
}
