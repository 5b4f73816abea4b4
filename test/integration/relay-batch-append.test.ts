import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { relayBed, silentLogger as logger } from '../support/relayBed.js';
import { createInput, relayBlockingConnection, uid } from '../support/fixtures.js';
import { monitorCommands, type CommandMonitor } from '../support/command-monitor.js';
import { waitUntil } from '../support/wait.js';
import { loadScriptSource, runScript } from '../../src/redis/scripts.js';
import { keys } from '../../src/redis/keys.js';
import { fingerprint } from '../../src/calls/store.js';
import { Redis } from 'ioredis';
import { EventLog, parseLiveMessage, type UserAppend } from '../../src/events/eventLog.js';
import { LOG_NOTICE_EPOCH, logNoticeEntries } from '../../src/events/logNotice.js';
import { OutboxRelay } from '../../src/events/relay.js';
import { RELAY_GROUP } from '../../src/events/outboxAcks.js';
import type { ChangeHandler } from '../../src/calls/change.js';
import type { EventPayload } from '../../src/events/payloads.js';

/**
 * On a single Redis the relay appends a whole batch's events, for every user of the batch, with
 * ONE lua/appendEvents.lua call (docs/architecture.md "Relays"), and each user's log still holds
 * each event exactly once, also when the batch is handed over again. Counted with Redis's own
 * MONITOR on a real Redis and a real relay.
 */

const ks = { prefix: 'rb', shards: 1 };
const bed = relayBed(ks);
const appendSha = createHash('sha1').update(loadScriptSource('appendEvents')).digest('hex');

/** The appendEvents calls Redis ran since the last take: each one's number of keys. */
async function appendCalls(monitor: CommandMonitor): Promise<number[]> {
  await monitor.barrier();
  return monitor
    .take()
    .filter((c) => c.name === 'evalsha' && c.args[0] === appendSha)
    .map((c) => Number(c.args[1]));
}

/** A user's log: each entry's outbox origin (`e`) and event type. */
async function logOf(userId: string): Promise<{ origin: string; type: string }[]> {
  const entries = (await bed.redis.xrange(keys.eventLog(ks, userId), '-', '+')) as [string, string[]][];
  return entries.map(([, f]) => {
    const field = (name: string) => f[f.indexOf(name) + 1]!;
    return { origin: field('e'), type: (JSON.parse(field('p')) as EventPayload).type };
  });
}

async function outboxSettled(): Promise<boolean> {
  const key = keys.outboxForShard(ks, 0);
  const [len, pending] = await Promise.all([bed.redis.xlen(key), bed.redis.xpending(key, RELAY_GROUP)]);
  return len === 0 && (pending as [number])[0] === 0;
}

/**
 * `n` one-to-one calls, each declined by its callee, written before a relay starts, on the one
 * outbox shard: its first read returns them all as one batch (2n users). Returns the callers
 * (each callee is `<caller>-callee`) and the outbox entries, in order.
 */
async function declinedCalls(n: number): Promise<{ callers: string[]; entries: string[] }> {
  const callers = Array.from({ length: n }, () => uid('caller'));
  for (const caller of callers) {
    const input = createInput(caller);
    await bed.calls.create(input);
    const callee = input.calleeUserId;
    await bed.calls.end({
      callId: input.callId,
      userId: callee,
      installationId: `${callee}-phone`,
      reason: 'declined',
      operationId: `e-${input.callId}`,
      fingerprint: fingerprint('end', [input.callId, 'declined']),
    });
  }
  const entries = (await bed.redis.xrange(keys.outboxForShard(ks, 0), '-', '+')).map(([id]) => id);
  expect(entries).toHaveLength(2 * n);
  return { callers, entries };
}

/**
 * Runs a relay with `handler` until `done` and the outbox is empty; returns the appendEvents
 * calls Redis ran meanwhile, each as its number of keys.
 */
async function relayed(handler: ChangeHandler, done: () => boolean): Promise<number[]> {
  const monitor = await monitorCommands(Number(new URL(bed.server.url).port));
  try {
    const relay = new OutboxRelay(bed.redis, () => relayBlockingConnection(bed.server.url), bed.eventLog, [handler], logger, { ...ks, batchSize: 256, gatherMs: 0, blockMs: 100, leaseMs: 3000 });
    await relay.start();
    try {
      await waitUntil('the batch handled', done, 10_000);
      await waitUntil('the outbox acknowledged and emptied', outboxSettled, 10_000);
    } finally {
      await relay.stop();
    }
    return await appendCalls(monitor);
  } finally {
    monitor.close();
  }
}

/** A handler whose first run fails, so the relay reads the batch again and delivers it a second time. */
function handlerFailingOnce(): ChangeHandler & { runs: number } {
  const h = {
    name: 'failsOnce',
    runs: 0,
    handle: async () => {
      if (++h.runs === 1) throw new Error('first run fails');
    },
  };
  return h;
}

describe('one append per relay batch on a single Redis', () => {
  it('a batch of five declined calls (ten users) is one appendEvents call, and again one when it is handed over again; each event is logged once', async () => {
    const { callers, entries } = await declinedCalls(5);
    // The first run of the batch fails in its handler: the batch is read again from the pending
    // entries and delivered a second time, on the command connection.
    const failsOnce = handlerFailingOnce();
    // Two deliveries of the one batch, each a single call with the six keys of each of the ten users.
    expect(await relayed(failsOnce, () => failsOnce.runs >= 2)).toEqual([60, 60]);
    expect(failsOnce.runs).toBe(2);

    for (const [i, caller] of callers.entries()) {
      const shardTag = (n: number) => `0:${entries[n]!}`;
      // The caller learns of the decline; the callee's log has the invitation and the end.
      expect(await logOf(caller)).toEqual([{ origin: shardTag(2 * i + 1), type: 'call.ended' }]);
      expect(await logOf(`${caller}-callee`)).toEqual([
        { origin: shardTag(2 * i), type: 'call.invited' },
        { origin: shardTag(2 * i + 1), type: 'call.ended' },
      ]);
      // Both filed the ended call in their history.
      expect(await bed.redis.zcard(keys.userHistoryIndex(ks, caller))).toBe(1);
      expect(await bed.redis.zcard(keys.userHistoryIndex(ks, `${caller}-callee`))).toBe(1);
      expect(await bed.redis.exists(keys.userActiveCalls(ks, caller))).toBe(0);
    }
  });

  it("the batch's new entries go out as one log notice on the shard's early channel, each as its user's channel would have carried it; a handed-over batch publishes none again", async () => {
    const { callers } = await declinedCalls(3);
    const users = callers.flatMap((c) => [c, `${c}-callee`]);
    const earlyChannel = keys.earlyChannel(ks, 0);
    const subscriber = new Redis(bed.server.url);
    const heard: { channel: string; message: string }[] = [];
    subscriber.on('smessage', (channel: string, message: string) => heard.push({ channel, message }));
    await subscriber.ssubscribe(earlyChannel, ...users.map((u) => keys.liveChannel(ks, u)));
    try {
      const failsOnce = handlerFailingOnce();
      expect(await relayed(failsOnce, () => failsOnce.runs >= 2)).toEqual([36, 36]);
      await waitUntil('the notice heard', () => heard.some((h) => parseLiveMessage(h.message)?.epoch === LOG_NOTICE_EPOCH), 5_000);
      // Nothing on the users' own channels, and one notice (the second delivery appended nothing).
      expect(heard.filter((h) => h.channel !== earlyChannel)).toEqual([]);
      const notices = heard.map((h) => parseLiveMessage(h.message)!).filter((m) => m.epoch === LOG_NOTICE_EPOCH);
      expect(notices).toHaveLength(1);
      // Its entries are the logs' entries, in each user's order, chained by their previous IDs.
      const entries = [...logNoticeEntries(notices[0]!.json)];
      for (const user of users) {
        const logged = (await bed.redis.xrange(keys.eventLog(ks, user), '-', '+')) as [string, string[]][];
        const mine = entries.filter((e) => e.channel === keys.liveChannel(ks, user)).map((e) => e.message);
        expect(mine.map((m) => m.id)).toEqual(logged.map(([id]) => id));
        expect(mine.map((m) => JSON.parse(m.json) as EventPayload)).toEqual(logged.map(([, f]) => JSON.parse(f[f.indexOf('p') + 1]!) as EventPayload));
        expect(mine.slice(1).map((m) => m.previousId)).toEqual(mine.slice(0, -1).map((m) => m.id));
      }
      expect(entries).toHaveLength(9);
    } finally {
      subscriber.disconnect();
    }
  });

  it('a batch of 70 users is split at 64 users a call', async () => {
    const { callers } = await declinedCalls(35);
    let handled = 0;
    const counting: ChangeHandler = {
      name: 'counting',
      handle: async (changes) => {
        handled += changes.length;
      },
    };
    expect(await relayed(counting, () => handled >= 70)).toEqual([64 * 6, 6 * 6]);
    for (const caller of callers) {
      expect(await logOf(caller)).toHaveLength(1);
      expect(await logOf(`${caller}-callee`)).toHaveLength(2);
    }
  });
});

describe('lua/appendEvents.lua with several users', () => {
  const payload = (n: number): EventPayload => ({ schemaVersion: 1, type: 'call.renamed', eventId: `ev-${n}`, callId: `call-${n}`, revision: '2', occurredAtMs: 1 }) as unknown as EventPayload;
  const deliveries = (userId: string, ids: string[]) => ids.map((entryId, n) => ({ entryId, delivery: { userId, payload: payload(n) } }));

  it('answers per user in order: a user without events keeps their busy marker and push registrations come back', async () => {
    const [a, b, c] = [uid('a'), uid('b'), uid('c')];
    await bed.redis.hset(keys.pushRegistrations(ks, b), 'b-phone', '{"kind":"apns"}');
    const users: UserAppend[] = [
      { userId: a, shard: 0, deliveries: deliveries(a, ['1-1', '2-1']) },
      { userId: b, shard: 0, deliveries: [], marker: { op: 'set', callId: 'call-b' }, withPush: true },
      { userId: c, shard: 3, deliveries: deliveries(c, ['5-1']), withPush: true },
    ];
    const call = bed.eventLog.appendUsersCall(users);
    const replies = (await runScript(bed.redis, 'appendEvents', call.keys, call.args)) as [string, string, number, string[]][];
    expect(replies).toHaveLength(3);
    expect(replies.map((r) => r[2])).toEqual([2, 0, 1]);
    expect(replies[1]).toEqual(['', '', 0, ['b-phone', '{"kind":"apns"}']]);
    expect(replies[2]![3]).toEqual([]);
    expect((await logOf(a)).map((e) => e.origin)).toEqual(['0:1-1', '0:2-1']);
    expect(await bed.redis.exists(keys.eventLog(ks, b))).toBe(0);
    expect(await bed.redis.hget(keys.eventLogMeta(ks, b), 'active')).toBe('call-b');
    expect(await bed.redis.pttl(keys.eventLogMeta(ks, b))).toBeGreaterThan(0);
    expect((await logOf(c)).map((e) => e.origin)).toEqual(['3:5-1']);
    // The epoch and last entry ID a user's reply names are that user's log's.
    expect(replies[0]![1]).toBe((await bed.redis.xrevrange(keys.eventLog(ks, a), '+', '-', 'COUNT', 1))[0]![0]);
    expect(replies[0]![0]).toBe(await bed.redis.hget(keys.eventLogMeta(ks, a), 'epoch'));

    // The same call again, plus one new entry for a: only that one is appended.
    users[0] = { userId: a, shard: 0, deliveries: deliveries(a, ['1-1', '2-1', '3-1']) };
    expect(await bed.eventLog.appendUsers(users)).toEqual([[], ['b-phone', '{"kind":"apns"}'], []]);
    expect((await logOf(a)).map((e) => e.origin)).toEqual(['0:1-1', '0:2-1', '0:3-1']);
    expect((await logOf(c)).map((e) => e.origin)).toEqual(['3:5-1']);
  });

  it('a user with more arguments than Lua can unpack (8,000) in one call, beside another', async () => {
    const [a, b] = [uid('a'), uid('b')];
    const ids = Array.from({ length: 2500 }, (_, i) => `${i + 1}-0`);
    const big = new EventLog(bed.redis, { ...ks, maxLen: 10_000, maxAgeMs: 60_000, metaTtlMs: 600_000 });
    await big.appendUsers([
      { userId: a, shard: 0, deliveries: deliveries(a, ids) },
      { userId: b, shard: 0, deliveries: deliveries(b, ['1-0']) },
    ]);
    expect(await bed.redis.xlen(keys.eventLog(ks, a))).toBe(2500);
    expect(await bed.redis.xlen(keys.eventLog(ks, b))).toBe(1);
  });

  it('refuses arguments that do not end with the last user block, before writing anything', async () => {
    const a = uid('a');
    const call = bed.eventLog.appendUsersCall([{ userId: a, shard: 0, deliveries: deliveries(a, ['1-0']) }]);
    await expect(runScript(bed.redis, 'appendEvents', call.keys, { ...call.args, blocks: [...call.args.blocks, 'extra'] })).rejects.toThrow(/one argument block per user/);
    await expect(runScript(bed.redis, 'appendEvents', [...call.keys, 'k7'], call.args)).rejects.toThrow(/one argument block per user/);
    expect(await bed.redis.exists(keys.eventLog(ks, a), keys.eventLogMeta(ks, a))).toBe(0);
  });
});

describe('a relay that gathers (RELAY_GATHER_MS)', () => {
  it('relays a change to an idle shard at once, and the changes made during the pause that follows as one batch, with one append call', async () => {
    // Long, so that the three creates surely fall inside it on a loaded machine.
    const GATHER_MS = 3_000;
    const batches: string[][] = [];
    const recording: ChangeHandler = {
      name: 'recording',
      handle: async (changes) => {
        batches.push(changes.map((c) => c.call.callId));
      },
    };
    const monitor = await monitorCommands(Number(new URL(bed.server.url).port));
    const relay = new OutboxRelay(bed.redis, () => relayBlockingConnection(bed.server.url), bed.eventLog, [recording], logger, { ...ks, batchSize: 256, gatherMs: GATHER_MS, blockMs: 100, leaseMs: 3000 });
    await relay.start();
    try {
      const first = createInput(uid('caller'));
      const createdAt = Date.now();
      await bed.calls.create(first);
      await waitUntil('the first change relayed', () => batches.length === 1, 10_000);
      // Not held back by a pause: the shard was idle.
      expect(Date.now() - createdAt).toBeLessThan(GATHER_MS);
      const during = [createInput(uid('caller')), createInput(uid('caller')), createInput(uid('caller'))];
      for (const input of during) await bed.calls.create(input);
      await waitUntil('the three relayed', () => batches.flat().length === 4, 10_000);
      expect(batches).toEqual([[first.callId], during.map((i) => i.callId)]);
      await waitUntil('the outbox acknowledged and emptied', outboxSettled, 10_000);
    } finally {
      await relay.stop();
    }
    // Each batch one append call: the first with its two users, the second with all six.
    expect(await appendCalls(monitor)).toEqual([12, 36]);
    monitor.close();
  });
});
