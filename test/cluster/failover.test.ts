import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { startRedisCluster, redisCommand, type RedisCluster } from '../support/redis-server.js';
import { startServer, type TestServer } from '../support/server.js';
import { device, getCall, sleep, uid, type Device } from '../support/fixtures.js';
import { connect, type SignalingClient } from '../support/ws-client.js';
import { readAllEvents, waitUntil } from '../e2e/helpers.js';

/**
 * A primary of the cluster is killed (SIGKILL) under a steady call load; its replica is promoted.
 * docs/operations.md "Redis Cluster" documents the window: a change Redis acknowledged within about a second
 * before the kill may not have reached the replica (replication is asynchronous). Checked:
 *  - during the failover requests fail only with 503 `unavailable` + retry-after, and then succeed;
 *  - every change acknowledged outside the window is intact (the call's stored state is at least
 *    as far as the last acknowledged change);
 *  - no call stays ringing past its deadline (ring sweeps and relays recover on their own);
 *  - a device that reconnects with its cursor gets every event of the intact calls, each once.
 */

const RING_MS = 3000;
/** Changes acknowledged this long before the kill may be lost (asynchronous replication). */
const WINDOW_MS = 1000;

let cluster: RedisCluster;
let servers: TestServer[] = [];

beforeAll(async () => {
  // Failover within a few seconds: the test kills a primary and waits for its replica.
  cluster = await startRedisCluster(3, 1, { nodeTimeoutMs: 2_000 });
  const env = { REDIS_CLUSTER_NODES: cluster.seedList, RING_TIMEOUT_MS: String(RING_MS), RELAY_CLAIM_IDLE_MS: '1500', EVENT_LOG_MAX_LEN: '100000', CALL_WAITING: 'true' };
  servers = [await startServer({ ...env, ROLES: 'api,gateway,worker' }), await startServer({ ...env, ROLES: 'api,gateway,worker' })];
}, 90_000);
afterAll(async () => {
  // A server that died under the failover says why (its last lines: an uncaught error's stack).
  for (const s of servers) if (s.child.exitCode !== null) process.stderr.write(`server ${s.url} exited ${s.child.exitCode}:\n${s.logs().slice(-4000)}\n`);
  await Promise.all(servers.map((s) => s.stop()));
  await cluster?.stop();
});

type Step = 'created' | 'answered' | 'ended';
interface Tracked {
  callId: string;
  caller: Device;
  callee: Device;
  /** The last change acknowledged with 2xx, and when. */
  acked?: { step: Step; atMs: number };
  /** A later request found no such call: its creation was lost (in the window only). */
  notFound?: boolean;
}

const RANK: Record<string, number> = { ringing: 1, accepted: 2, ended: 3 };
const STEP_RANK: Record<Step, number> = { created: 1, answered: 2, ended: 3 };

describe('failover of a primary under traffic', () => {
  it('keeps serving, loses nothing acknowledged outside the window, leaves no call ringing, and devices resume by cursor', async () => {
    const urls = servers.map((s) => s.url);
    const callees = Array.from({ length: 4 }, () => device(urls[0]!));
    const cursors = new Map<string, string>();
    for (const c of callees) cursors.set(c.userId, (await c.api.get('/v1/call-events')).json.nextCursor as string);
    const sockets: SignalingClient[] = await Promise.all(callees.map((c, i) => connect(urls[i % 2]!, c.token)));

    const calls: Tracked[] = [];
    const statuses = new Map<number, number>();
    const count = (s: number) => statuses.set(s, (statuses.get(s) ?? 0) + 1);
    let running = true;
    const ack = (t: Tracked, step: Step, status: number) => {
      count(status);
      if (status >= 200 && status < 300) t.acked = { step, atMs: Date.now() };
      if (status === 404) t.notFound = true;
    };
    // Each loop: create; then answer and end, or leave it to ring out, or cancel it.
    const loop = async (n: number) => {
      for (let i = 0; running; i++) {
        const url = urls[(n + i) % 2]!;
        const callee = callees[(n + i) % callees.length]!;
        const t: Tracked = { callId: randomUUID(), caller: device(url), callee: device(url, callee.userId, callee.installationId) };
        calls.push(t);
        const created = await t.caller.api.post('/v1/calls', { callId: t.callId, calleeUserId: callee.userId, operationId: uid('op') });
        ack(t, 'created', created.status);
        if (created.status !== 201) {
          await sleep(100);
          continue;
        }
        if (i % 3 === 1) continue; // rings out
        if (i % 3 === 0) {
          const answered = await t.callee.api.post(`/v1/calls/${t.callId}/answer`, { operationId: uid('op'), installationId: t.callee.installationId });
          ack(t, 'answered', answered.status);
        }
        const ended = await t.caller.api.post(`/v1/calls/${t.callId}/end`, { operationId: uid('op'), reason: 'localHangup' });
        ack(t, 'ended', ended.status);
        await sleep(20);
      }
    };
    const loops = Array.from({ length: 6 }, (_, n) => loop(n));

    await sleep(2000);
    const victim = cluster.servers[0]!;
    const killedAt = Date.now();
    process.kill(victim.pid, 'SIGKILL');
    // The replica takes over (cluster-node-timeout 2 s); the cluster is whole again.
    const others = cluster.servers.filter((s) => s !== victim);
    await waitUntil(
      'the replica promoted and the cluster healthy again',
      async () => {
        const [nodes, info] = await Promise.all([redisCommand(others[0]!.port, ['CLUSTER', 'NODES']), redisCommand(others[0]!.port, ['CLUSTER', 'INFO'])]);
        const failed = nodes.split('\n').some((l) => l.includes(`:${victim.port}@`) && /\bfail\b/.test(l));
        return failed && info.includes('cluster_state:ok');
      },
      30_000,
    );
    const recoveredAt = Date.now();
    // Traffic goes on after the failover, and succeeds.
    await sleep(8000);
    running = false;
    await Promise.all(loops);

    const inWindow = (t: Tracked) => t.acked !== undefined && t.acked.atMs > killedAt - WINDOW_MS && t.acked.atMs < recoveredAt;
    // Only 2xx, the 409s of a race, 503 + retry-after while the slots moved, and 404 for a call
    // whose creation was acknowledged in the window and lost with the primary.
    for (const s of statuses.keys()) expect([200, 201, 404, 409, 503], `status ${s}`).toContain(s);
    for (const t of calls.filter((c) => c.notFound)) expect(inWindow(t), `404 for ${t.callId} created outside the window`).toBe(true);
    const afterRecovery = calls.filter((t) => t.acked && t.acked.atMs > recoveredAt + 1000);
    expect(afterRecovery.length).toBeGreaterThan(0);

    // Every ringing call has rung out by now (ring sweeps recovered), and every change
    // acknowledged outside the window is intact.
    await sleep(RING_MS + 1500);
    let intact = 0;
    const lostInWindow: string[] = [];
    for (const t of calls) {
      if (!t.acked) continue;
      const res = await getCall(t.caller, t.callId);
      if (res.status === 404 || RANK[res.json.state as string]! < STEP_RANK[t.acked.step]) {
        if (inWindow(t)) {
          lostInWindow.push(t.callId);
          continue;
        }
        throw new Error(`call ${t.callId}: acknowledged ${t.acked.step} at ${t.acked.atMs - killedAt} ms from the kill, stored ${res.status} ${res.text}`);
      }
      expect(res.status).toBe(200);
      expect(res.json.state, t.callId).not.toBe('ringing');
      intact++;
    }
    expect(intact).toBeGreaterThan(calls.length / 2);

    // A device that reconnects with its cursor gets each intact call's events, each once (the
    // relays catch up on their own after the failover).
    for (const callee of callees) {
      const expected = calls.filter((t) => t.callee.userId === callee.userId && t.acked && !lostInWindow.includes(t.callId) && !inWindow(t));
      let events: Awaited<ReturnType<typeof readAllEvents>>['events'] = [];
      await waitUntil(
        `every intact call's events in ${callee.userId}'s log`,
        async () => {
          events = (await readAllEvents(callee, cursors.get(callee.userId)!)).events;
          const byCall = new Set(events.map((e) => e.callId));
          return expected.every((t) => byCall.has(t.callId));
        },
        30_000,
      );
      const ids = events.map((e) => e.eventId);
      expect(new Set(ids).size, 'no event twice in the log').toBe(ids.length);
      const resumed = await connect(urls[1]!, callee.token, { cursor: cursors.get(callee.userId)! });
      try {
        await resumed.until(() => resumed.events().length >= events.length, 10_000, 'the replay');
        expect(resumed.events().map((e) => e.eventId)).toEqual(ids);
      } finally {
        await resumed.close();
      }
    }
    await Promise.all(sockets.map((s) => s.close()));
    // The window as measured in this run (docs/operations.md "Redis Cluster" gives the bound).
    console.log(`failover: ${calls.length} calls, ${intact} intact, ${lostInWindow.length} lost in the window, statuses ${JSON.stringify([...statuses])}, recovered ${recoveredAt - killedAt} ms after the kill`);
  }, 120_000);
});
