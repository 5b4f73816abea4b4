import { keys } from '../../src/redis/keys.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { startStack, type Stack } from '../support/stack.js';
import { device, headCursor, eventsUntil, sleep, uid } from '../support/fixtures.js';
import { waitUntil } from '../support/wait.js';

/**
 * Relays and the outbox shard leases (docs/architecture.md "Relays"): live relays share the shards, each about
 * shards ÷ relays; each call's events reach the log in order; a relay that dies loses its shards
 * to the others after RELAY_CLAIM_IDLE_MS, and they relay every shard.
 */
const SHARDS = 8;
let stack: Stack;

async function leaseHolders(): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < SHARDS; i++) out.push((await stack.redis.get(keys.shardLease({ prefix: 'cb', shards: SHARDS }, i))) ?? '');
  return out;
}

function countBy(values: string[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const v of values) out.set(v, (out.get(v) ?? 0) + 1);
  return out;
}

beforeAll(async () => {
  stack = await startStack({ RELAY_CLAIM_IDLE_MS: '1500' });
  await stack.addServer({ RELAY_CLAIM_IDLE_MS: '1500' });
});
afterAll(() => stack?.stop());

describe('relay shard leases', () => {
  it('two relays share the shards, half each, and keep them so', async () => {
    const halves = async () => {
      const holders = await leaseHolders();
      const counts = [...countBy(holders).entries()];
      return holders.every((h) => h !== '') && counts.length === 2 && counts.every(([, n]) => n === SHARDS / 2);
    };
    await waitUntil('each relay holding half of the shards', halves, 10_000);
    // Still so a few lease periods later (no relay takes shards from a live one).
    await sleep(2000);
    expect(await halves()).toBe(true);
    // The holders are the two server processes.
    for (const h of new Set(await leaseHolders())) {
      expect(stack.servers.some((s) => h.includes(`:${s.child.pid}:`))).toBe(true);
    }
  });

  it('with two processes, every call’s events are in the log in the order they happened', async () => {
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

  it('when one relay is killed with SIGKILL, the other takes every shard after the lease', async () => {
    const victim = stack.servers[0]!;
    const survivor = stack.servers[1]!;
    // Consumer names are <host>:<pid>:<random>.
    const active = (await leaseHolders()).find((h) => h.includes(`:${victim.child.pid}:`))!;
    expect(active).toBeDefined();
    victim.child.kill('SIGKILL');
    await waitUntil(
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
