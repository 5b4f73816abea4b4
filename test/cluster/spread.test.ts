import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis, type Cluster } from 'ioredis';
import { startStack, type Stack } from '../support/stack.js';
import { acceptedCall, device, end, eventsUntil, headCursor, ringingCall } from '../support/fixtures.js';
import { connect, type SignalingClient } from '../support/ws-client.js';
import { keys } from '../../src/redis/keys.js';
import { waitUntil } from '../e2e/helpers.js';

/**
 * On a Redis Cluster (3 primaries + 3 replicas, REDIS_CLUSTER_NODES): the data of many calls
 * spreads over every primary; scripts run by EVALSHA on every primary, also after they lost their
 * script cache; two worker processes share the relay's shards; a gateway subscribes per primary.
 */

const ks = { prefix: 'cb', shards: 8 };
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ ROLES: 'api,gateway,worker' });
  await stack.addServer({ ROLES: 'worker' });
});
afterAll(() => stack?.stop());

/** A plain connection to every primary, by CLUSTER NODES. */
async function primaries(): Promise<Redis[]> {
  const cluster = stack.redis as unknown as Cluster;
  return cluster.nodes('master').map((n) => new Redis({ host: n.options.host!, port: n.options.port!, lazyConnect: false }));
}

describe('on a Redis Cluster', () => {
  it('calls, outboxes and event logs spread over every primary; every script runs on each', async () => {
    const lifecycles = await Promise.all(
      Array.from({ length: 24 }, async () => {
        const pair = await acceptedCall(stack.url);
        expect((await end(pair.caller, pair.callId, 'localHangup')).status).toBe(200);
        return pair;
      }),
    );
    const nodes = await primaries();
    try {
      const perNode = await Promise.all(nodes.map(async (n) => (await n.dbsize()) as number));
      // Each primary holds part of the data (calls, operation records, logs, leases, queues).
      for (const size of perNode) expect(size).toBeGreaterThan(0);
      // The callee's log gets each call's events (relayed from shards on different primaries).
      for (const { callee, callId } of lifecycles.slice(0, 4)) {
        await waitUntil(`call ${callId} in its callee's log`, async () => {
          const log = await stack.redis.xrange(keys.eventLog(ks, callee.userId), '-', '+');
          return log.some(([, f]) => JSON.parse(f[1]!).callId === callId);
        }, 10_000);
      }
      const slots = new Set(await Promise.all(lifecycles.map((l) => stack.redis.cluster('KEYSLOT', keys.call(ks, l.callId)))));
      expect(slots.size).toBeGreaterThan(3);
    } finally {
      for (const n of nodes) n.disconnect();
    }
  });

  it('after every primary lost its script cache, calls go on (EVALSHA falls back to EVAL)', async () => {
    const nodes = await primaries();
    try {
      await Promise.all(nodes.map((n) => n.script('FLUSH')));
    } finally {
      for (const n of nodes) n.disconnect();
    }
    const pairs = await Promise.all(Array.from({ length: 8 }, () => acceptedCall(stack.url)));
    for (const p of pairs) expect((await end(p.caller, p.callId, 'localHangup')).status).toBe(200);
  });

  it('two worker processes share the outbox shards', async () => {
    await waitUntil('each worker holding half of the shards', async () => {
      const holders = await Promise.all(Array.from({ length: ks.shards }, (_, i) => stack.redis.get(keys.shardLease(ks, i))));
      const counts = new Map<string, number>();
      for (const h of holders) counts.set(h ?? '', (counts.get(h ?? '') ?? 0) + 1);
      return !counts.has('') && counts.size === 2 && [...counts.values()].every((n) => n === ks.shards / 2);
    }, 10_000);
  });

  it('a gateway holds one subscriber connection per primary whatever the number of users, and delivers live', async () => {
    const url = stack.url;
    const callees = Array.from({ length: 12 }, () => device(url));
    const sockets: SignalingClient[] = await Promise.all(callees.map((d) => connect(url, d.token)));
    try {
      const nodes = await primaries();
      try {
        let total = 0;
        for (const n of nodes) {
          const list = (await n.client('LIST')) as string;
          const subscribers = list.split('\n').filter((l) => /name=\S*calling-backend:subscriber/.test(l) && /ssub=[1-9]/.test(l));
          expect(subscribers.length).toBeLessThanOrEqual(1);
          total += subscribers.length;
        }
        // 12 users, spread over the primaries' slots, on at most one connection per primary.
        expect(total).toBeGreaterThanOrEqual(1);
      } finally {
        for (const n of nodes) n.disconnect();
      }
      const calls = await Promise.all(callees.map((callee) => ringingCall(url, device(url), callee)));
      for (const [i, s] of sockets.entries()) {
        const [e] = await s.waitForEvents(1, 10_000);
        expect(e).toMatchObject({ type: 'call.invited', callId: calls[i]!.callId });
      }
      // And the same events are in each log, for a device that resumes by cursor.
      const cursor = await headCursor(callees[0]!);
      const again = await ringingCall(url, device(url), callees[0]!);
      const events = await eventsUntil(callees[0]!, cursor, (e) => e.length >= 1, 10_000);
      expect(events.map((e) => e.callId)).toEqual([again.callId]);
    } finally {
      await Promise.all(sockets.map((s) => s.close()));
    }
  });
});
