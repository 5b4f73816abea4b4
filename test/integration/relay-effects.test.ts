import { describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { relayBed, silentLogger as logger } from '../support/relayBed.js';
import { createInput, relayBlockingConnection } from '../support/fixtures.js';
import { keys } from '../../src/redis/keys.js';
import { OutboxRelay } from '../../src/events/relay.js';
import { RELAY_GROUP } from '../../src/events/outboxAcks.js';
import type { CallChange, ChangeHandler } from '../../src/calls/change.js';
import { waitUntil } from '../e2e/helpers.js';

/**
 * The relay's side effects run behind the event deliveries: a failing handler gets its batches
 * again (nothing is acknowledged before every handler is done; the handlers tolerate that late,
 * out-of-order retry), and a slow handler holds back neither the events nor another handler.
 */

const ks = { prefix: 'rx', shards: 4 };
const bed = relayBed(ks);

const blockingConnection = () => relayBlockingConnection(bed.server.url);

async function createCall(callerUserId: string): Promise<string> {
  const input = createInput(callerUserId);
  await bed.calls.create(input);
  return input.callId;
}

async function outboxSettled(): Promise<boolean> {
  for (let shard = 0; shard < ks.shards; shard++) {
    const key = keys.outboxForShard(ks, shard);
    const [len, pending] = await Promise.all([bed.redis.xlen(key), bed.redis.xpending(key, RELAY_GROUP)]);
    if (len !== 0 || (pending as [number])[0] !== 0) return false;
  }
  return true;
}

describe('relay side effects', () => {
  it('a failing handler gets its batches again, and nothing is acknowledged before it succeeded', async () => {
    const seen = new Set<string>();
    let failing = true;
    let failures = 0;
    const flaky: ChangeHandler = {
      name: 'flaky',
      handle: async (changes: readonly CallChange[]) => {
        if (failing) {
          failures++;
          throw new Error('handler failing');
        }
        for (const c of changes) seen.add(c.call.callId);
      },
    };
    const relay = new OutboxRelay(bed.redis, blockingConnection, bed.eventLog, [flaky], logger, { ...ks, batchSize: 64, gatherMs: 0, blockMs: 100, leaseMs: 3000 });
    await relay.start();
    try {
      const user = `u${randomUUID().slice(0, 8)}`;
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) ids.push(await createCall(user));
      await waitUntil('three failed handler runs', () => failures >= 3, 10_000);
      // Still failing: every change is still in the outbox, unacknowledged.
      expect(await outboxSettled()).toBe(false);
      failing = false;
      await waitUntil('every change handled', () => ids.every((id) => seen.has(id)), 10_000);
      await waitUntil('the outbox acknowledged and emptied', outboxSettled, 10_000);
    } finally {
      await relay.stop();
    }
  });

  it('a slow handler holds back neither the events nor the other handlers', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const fast: string[] = [];
    const slow: ChangeHandler = { name: 'slow', handle: () => gate };
    const quick: ChangeHandler = {
      name: 'quick',
      handle: async (changes) => {
        for (const c of changes) fast.push(c.call.callId);
      },
    };
    const relay = new OutboxRelay(bed.redis, blockingConnection, bed.eventLog, [slow, quick], logger, { ...ks, batchSize: 1, gatherMs: 0, blockMs: 100, leaseMs: 3000 });
    await relay.start();
    try {
      const user = `u${randomUUID().slice(0, 8)}`;
      const first = await createCall(user);
      const second = await createCall(user);
      // Both calls' events are in the callee's log and the quick handler saw both, while the
      // slow one still holds the first batch.
      await waitUntil('the quick handler saw both calls', () => fast.includes(first) && fast.includes(second), 10_000);
      const log = await bed.redis.xrange(keys.eventLog(ks, `${user}-callee`), '-', '+');
      expect(log.map(([, fields]) => JSON.parse(fields[1]!).callId).sort()).toEqual([first, second].sort());
      expect(await outboxSettled()).toBe(false);
      release();
      await waitUntil('the outbox acknowledged and emptied', outboxSettled, 10_000);
    } finally {
      release();
      await relay.stop();
    }
  });
  it('a handler gets the calls it names as stored, and the relay goes on when Redis lost its script cache', async () => {
    const seen: { callId: string; state: string | undefined }[] = [];
    const reader: ChangeHandler = {
      name: 'reader',
      callsOf: (changes) => changes.map((c) => c.call.callId),
      handle: async (changes, reads) => {
        for (const c of changes) seen.push({ callId: c.call.callId, state: reads.calls.get(c.call.callId)?.state });
      },
    };
    const relay = new OutboxRelay(bed.redis, blockingConnection, bed.eventLog, [reader], logger, { ...ks, batchSize: 1, gatherMs: 0, blockMs: 100, leaseMs: 3000 });
    await relay.start();
    try {
      const user = `u${randomUUID().slice(0, 8)}`;
      const first = await createCall(user);
      await waitUntil('the first call handled', () => seen.some((s) => s.callId === first), 10_000);
      // A restarted Redis (or SCRIPT FLUSH) forgets the scripts the relay runs by their hash.
      await bed.redis.script('FLUSH');
      const second = await createCall(user);
      await waitUntil('the second call handled', () => seen.some((s) => s.callId === second), 10_000);
      await waitUntil('the outbox acknowledged and emptied', outboxSettled, 10_000);
      expect(seen).toEqual([
        { callId: first, state: 'ringing' },
        { callId: second, state: 'ringing' },
      ]);
      const log = await bed.redis.xrange(keys.eventLog(ks, `${user}-callee`), '-', '+');
      expect(log.map(([, fields]) => JSON.parse(fields[1]!).callId)).toEqual([first, second]);
    } finally {
      await relay.stop();
    }
  });
});
