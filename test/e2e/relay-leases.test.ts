import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { startStack, type Stack } from '../support/stack.js';
import { device, headCursor, eventsUntil, sleep, uid } from '../support/fixtures.js';

/**
 * Relays and the outbox shard leases: one relay holds every shard while the others stand by, so
 * every user's log follows the order of the changes; a relay that dies loses its shards to a
 * standby after RELAY_CLAIM_IDLE_MS.
 */
const SHARDS = 8;
let stack: Stack;

async function leaseHolders(): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < SHARDS; i++) out.push((await stack.redis.get(`cb:{c${i}}:relay-lease`)) ?? '');
  return out;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

beforeAll(async () => {
  stack = await startStack({ RELAY_CLAIM_IDLE_MS: '1500' });
  await stack.addServer({ RELAY_CLAIM_IDLE_MS: '1500' });
});
afterAll(() => stack?.stop());

describe('relay shard leases', () => {
  it('one relay holds every shard; the other stands by', async () => {
    await until('a single holder of every shard', async () => {
      const holders = await leaseHolders();
      return holders.every((h) => h !== '' && h === holders[0]);
    });
    // Still so a few lease periods later (the standby does not take shards from a live relay).
    await sleep(2000);
    const holders = await leaseHolders();
    expect(new Set(holders).size).toBe(1);
    expect(holders[0]).not.toBe('');
  });

  it('with two processes, every call’s events, and calls after calls, are in the log in the order they happened', async () => {
    const [a, b] = stack.servers.map((s) => s.url) as [string, string];
    const callee = device(a);
    const cursor = await headCursor(callee);
    const callIds: string[] = [];
    await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        const url = i % 2 ? a : b;
        const caller = device(url);
        const callId = randomUUID();
        callIds.push(callId);
        const created = await caller.api.post('/v1/calls', { callId, calleeUserId: callee.userId, operationId: uid('op') });
        expect(created.status).toBe(201);
        // Ended through the other process, right away.
        const end = await device(i % 2 ? b : a, caller.userId, caller.installationId).api.post(`/v1/calls/${callId}/end`, {
          operationId: uid('op'),
          reason: 'localHangup',
        });
        expect(end.status).toBe(200);
      }),
    );
    const events = await eventsUntil(callee, cursor, (e) => e.length >= 80, 15_000);
    for (const callId of callIds) {
      const types = events.filter((e) => e.callId === callId).map((e) => `${e.revision}:${e.type}`);
      expect(types.slice(0, 2), callId).toEqual(['1:call.invited', '2:call.ended']);
    }
  });

  it('when the active relay is killed with SIGKILL, the standby takes every shard after the lease', async () => {
    const active = (await leaseHolders())[0]!;
    // Consumer names are <host>:<pid>:<random>: find the process holding the leases.
    const victimIndex = stack.servers.findIndex((s) => active.includes(`:${s.child.pid}:`));
    expect(victimIndex).toBeGreaterThanOrEqual(0);
    const victim = stack.servers[victimIndex]!;
    const survivor = stack.servers[1 - victimIndex]!;
    victim.child.kill('SIGKILL');
    await until(
      'the survivor holding every shard',
      async () => {
        const holders = await leaseHolders();
        return holders.every((h) => h !== '' && h === holders[0] && h !== active);
      },
      15_000,
    );
    // And it relays every shard: calls spread over all shards still reach their callee.
    const url = survivor.url;
    const callee = device(url);
    const cursor = await headCursor(callee);
    for (let i = 0; i < 16; i++) {
      const res = await device(url).api.post('/v1/calls', { callId: randomUUID(), calleeUserId: callee.userId, operationId: uid('op') });
      expect(res.status).toBe(201);
    }
    const events = await eventsUntil(callee, cursor, (e) => e.length >= 16, 10_000);
    expect(events.filter((e) => e.type === 'call.invited')).toHaveLength(16);
  });
});
