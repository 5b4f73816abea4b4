import WebSocket from 'ws';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignalingClient, type EventPayload, type GapReason } from '@calling-backend/client';
import { keys } from '../../src/redis/keys.js';
import { redisCommand, startRedisCluster, type RedisCluster, type RedisServer } from '../support/redis-server.js';
import { startServer, type TestServer } from '../support/server.js';
import { randomUUID } from 'node:crypto';
import { device, getCall, uid, type Device } from '../support/fixtures.js';
import { waitUntil } from '../support/wait.js';
import { createCall } from '../e2e/helpers.js';

/**
 * The event log's epoch, proven on a failover that loses writes (docs/signaling.md "The epoch,
 * proven"): a cluster primary is killed right after writes its replica never received, so the
 * replica takes over with the users' logs as they were a moment earlier: the same epoch, and
 * fewer entries than devices already saw. Every device that saw a lost entry must get a `reset`
 * gap and resync by snapshot, never silence and never a continuation of the log past what it lost:
 *  - a device connected through the failover;
 *  - a device that was away and resumes with its cursor after the log grew again past that cursor
 *    (new entries whose IDs are later than the lost ones).
 *
 * How the writes are lost: the replica is stopped (SIGSTOP), the primary is given more writes
 * than the kernel's socket buffers between them hold, then the calls whose events are to be lost;
 * those wait in the primary's output buffer to its replica and die with it (SIGKILL). The replica
 * is then continued and promoted.
 */

const ks = { prefix: 'cb', shards: 8 };
const FILLER_MB = 40;

let cluster: RedisCluster;
let server: TestServer;
const clients: SignalingClient[] = [];

beforeAll(async () => {
  cluster = await startRedisCluster(3, 1, { nodeTimeoutMs: 2_000 });
  server = await startServer({ REDIS_CLUSTER_NODES: cluster.seedList, RELAY_CLAIM_IDLE_MS: '1500' });
}, 90_000);
afterAll(async () => {
  for (const c of clients) c.stop();
  await server?.stop();
  await cluster?.stop();
});

interface Watched {
  d: Device;
  client: SignalingClient;
  events: EventPayload[];
  gaps: GapReason[];
  cursor?: string;
}

function watch(d: Device, cursor?: string): Watched {
  const w = { d, events: [], gaps: [], cursor } as unknown as Watched;
  w.client = new SignalingClient({
    url: server.url.replace(/^http/, 'ws'),
    token: d.token,
    WebSocket,
    maxBackoffMs: 500,
    ...(cursor !== undefined ? { cursor } : {}),
    onEvent: (e) => w.events.push(e),
    onGap: (reason) => w.gaps.push(reason),
    saveCursor: (c) => (w.cursor = c),
    onError: () => {},
  });
  clients.push(w.client);
  return w;
}

/** The primary serving `key`'s slot, and its replica. */
async function nodesOf(key: string): Promise<{ primary: RedisServer; replica: RedisServer }> {
  const any = cluster.servers[0]!.port;
  const slot = Number((await redisCommand(any, ['CLUSTER', 'KEYSLOT', key])).replace(/^:/, ''));
  const lines = (await redisCommand(any, ['CLUSTER', 'NODES'])).split('\n').filter(Boolean).map((l) => l.split(' '));
  const portOf = (l: string[]) => Number(l[1]!.split('@')[0]!.split(':')[1]);
  const primaryLine = lines.find((l) => l[2]!.includes('master') && l.slice(8).some((r) => {
    const [from, to] = r.split('-').map(Number);
    return slot >= from! && slot <= (to ?? from)!;
  }))!;
  const replicaLine = lines.find((l) => l[3] === primaryLine[0])!;
  const byPort = (p: number) => cluster.servers.find((s) => s.port === p)!;
  return { primary: byPort(portOf(primaryLine)), replica: byPort(portOf(replicaLine)) };
}

/**
 * A create after the failover, made again (same callId and operationId: a replay) while the server
 * answers 503 `unavailable`: its cluster client may still be finding the promoted replica after the
 * cluster says it is whole, and an app retries on that answer (docs/api.md "Errors").
 */
async function createCallAfterFailover(caller: Device, calleeUserId: string): Promise<string> {
  const callId = randomUUID();
  const body = { callId, calleeUserId, operationId: uid('op') };
  let last = { status: 0, text: '' };
  await waitUntil('the server to take the create', async () => (last = await caller.api.post('/v1/calls', body)).status !== 503, 20_000, {
    intervalMs: 250,
    detail: () => last.text,
  });
  expect(last.status, last.text).toBe(201);
  return callId;
}

describe('a failover that loses writes its replica had not received', () => {
  it('devices that saw a lost entry get `reset` and resync by snapshot: connected, and resuming after the log grew past their cursor', async () => {
    const caller = device(server.url);
    // Users on one primary: the first user's, and others whose logs share its node.
    const first = device(server.url);
    const { primary, replica } = await nodesOf(keys.eventLog(ks, first.userId));
    const onVictim: Device[] = [first];
    while (onVictim.length < 6) {
      const d = device(server.url);
      if ((await nodesOf(keys.eventLog(ks, d.userId))).primary === primary) onVictim.push(d);
    }
    const connected = onVictim.slice(0, 3).map((d) => watch(d));
    const away = onVictim.slice(3).map((d) => watch(d));
    const all = [...connected, ...away];
    await Promise.all(all.map((w) => w.client.start()));

    // A first call each, replicated (WAIT on the primary).
    const kept = new Map<Watched, string>();
    for (const w of all) kept.set(w, (await createCall(caller, w.d.userId)).callId);
    await waitUntil('the first invitations', () => all.every((w) => w.events.length === 1), 10_000);
    const direct = new Redis(primary.port, '127.0.0.1', { maxRetriesPerRequest: 0, lazyConnect: true });
    direct.on('error', () => {});
    await direct.connect();
    expect(Number(await direct.call('WAIT', '1', '5000'))).toBe(1);

    // The replica stops reading; the primary's writes to it fill the socket buffers, then queue.
    process.kill(replica.pid, 'SIGSTOP');
    let killed = false;
    try {
      const tag = `{u:${first.userId}}`; // a key in a slot of this primary
      const chunk = 'x'.repeat(1024 * 1024);
      for (let i = 0; i < FILLER_MB; i++) await direct.set(`filler:${tag}:${i}`, chunk);
      // The calls whose events are lost: acknowledged, delivered, never replicated.
      const lost = new Map<Watched, string>();
      for (const w of all) lost.set(w, (await createCall(caller, w.d.userId)).callId);
      await waitUntil('the invitations to be lost, delivered', () => all.every((w) => w.events.length === 2), 10_000);
      const oldCursors = away.map((w) => w.cursor!);
      for (const w of away) w.client.stop();
      process.kill(primary.pid, 'SIGKILL');
      killed = true;
      direct.disconnect();
      process.kill(replica.pid, 'SIGCONT');

      // The replica takes over, without the lost calls.
      await waitUntil(
        'the replica promoted',
        async () => (await redisCommand(replica.port, ['INFO', 'replication']).catch(() => '')).includes('role:master'),
        30_000,
        { intervalMs: 200 },
      );
      await waitUntil('the cluster whole again', async () => (await redisCommand(replica.port, ['CLUSTER', 'INFO'])).includes('cluster_state:ok'), 30_000, { intervalMs: 200 });
      // The lost entries are really gone from the promoted replica (the calls themselves live in
      // their own slots, mostly on other primaries: only the users' log entries were lost).
      for (const [i, w] of away.entries()) {
        const id = oldCursors[i]!.split('_')[1]!;
        expect(await redisCommand(replica.port, ['XRANGE', keys.eventLog(ks, w.d.userId), id, id])).toBe('*0');
      }

      // The log grows again past the away devices' cursors: new entries, later IDs, same epoch.
      const fresh = new Map<Watched, string>();
      for (const w of all) fresh.set(w, await createCallAfterFailover(caller, w.d.userId));

      // Connected devices: a reset (the fresh call comes with it only if it was logged after the
      // gateway re-read the log: a reset's cursor is the head).
      await waitUntil('a reset on every connected device', () => connected.every((w) => w.gaps.includes('reset')), 30_000, { intervalMs: 100 });
      // Away devices resuming with a cursor at a lost entry: a reset, never the fresh call as if nothing happened.
      const resumed = away.map((w, i) => watch(w.d, oldCursors[i]));
      await Promise.all(resumed.map((w) => w.client.start()));
      for (const w of resumed) expect(w.gaps, w.d.userId).toEqual(['reset']);
      // Resync by snapshot (docs/protocol.md "Catching up over HTTP"): each call the device knew
      // of is read again (GET /v1/calls/{id}; the call records live in their own slots, so the
      // lost invitation's call is still there; one on the killed primary may have lost its last change).
      for (const w of all) {
        for (const id of [kept.get(w)!, lost.get(w)!]) expect([200, 404]).toContain((await getCall(w.d, id)).status);
      }
      // Then live, in the log's current line.
      const later = new Map<Watched, string>();
      for (const w of [...connected, ...resumed]) later.set(w, await createCallAfterFailover(caller, w.d.userId));
      await waitUntil('the later calls, live', () => [...later].every(([w, id]) => w.events.some((e) => e.callId === id)), 15_000, {
        detail: () =>
          [...later]
            .filter(([w, id]) => !w.events.some((e) => e.callId === id))
            .map(([w, id]) => `${w.d.userId}: missing ${id}; gaps ${w.gaps.join(',')}; saw ${w.events.map((e) => `${e.type} ${e.callId}`).join(', ')}`)
            .concat(server.logs().split('\n').filter((l) => !l.includes('"level":"info"')).slice(-20))
            .join('\n'),
      });
      for (const w of resumed) expect(w.gaps).toEqual(['reset']);
    } finally {
      if (!killed) {
        process.kill(replica.pid, 'SIGCONT');
        direct.disconnect();
      }
    }
  }, 120_000);
});
