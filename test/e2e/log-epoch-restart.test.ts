import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignalingClient, type EventPayload, type GapReason } from '@calling-backend/client';
import { crashAndRestartRedis, startRedis, type RedisServer } from '../support/redis-server.js';
import { startServer, type TestServer } from '../support/server.js';
import { device, getCall, type Device } from '../support/fixtures.js';
import { waitUntil } from '../support/wait.js';
import { createCall } from './helpers.js';

/**
 * The event log's epoch, proven where a log is really lost (docs/signaling.md "Cursors", "The
 * epoch, proven"): the single Redis is killed and restarted without persistence, so every user's
 * log is gone, under connected devices and with devices away holding their cursors. Each must get
 * a `reset` gap (never silence, never a continuation of the old log), can resync by snapshot
 * (GET /v1/calls/{id}: what it knew is gone, 404), and then gets new events live.
 */

const USERS = 20;

let redis: RedisServer;
let server: TestServer;
const clients: SignalingClient[] = [];

beforeAll(async () => {
  redis = await startRedis({ appendOnly: false });
  server = await startServer({ REDIS_URL: redis.url });
}, 60_000);
afterAll(async () => {
  for (const c of clients) c.stop();
  await server?.stop();
  await redis?.stop();
});

interface Watched {
  d: Device;
  client: SignalingClient;
  events: EventPayload[];
  gaps: { reason: GapReason; atEvent: number }[];
  cursor?: string;
}

function watch(d: Device, cursor?: string): Watched {
  const w: Watched = { d, events: [], gaps: [], cursor } as unknown as Watched;
  w.client = new SignalingClient({
    url: server.url.replace(/^http/, 'ws'),
    token: d.token,
    WebSocket,
    maxBackoffMs: 500,
    ...(cursor !== undefined ? { cursor } : {}),
    onEvent: (e) => w.events.push(e),
    onGap: (reason) => w.gaps.push({ reason, atEvent: w.events.length }),
    saveCursor: (c) => (w.cursor = c),
    onError: () => {},
  });
  clients.push(w.client);
  return w;
}

describe('Redis restarted without persistence', () => {
  it('connected devices and devices resuming with an old cursor all get `reset`, resync by snapshot, then events flow', async () => {
    const caller = device(server.url);
    const connected = Array.from({ length: USERS }, () => watch(device(server.url)));
    const away = Array.from({ length: USERS }, () => watch(device(server.url)));
    await Promise.all([...connected, ...away].map((w) => w.client.start()));

    // One call each, seen by every device; the away devices then go, keeping their cursors.
    const before = new Map<Watched, string>();
    for (const w of [...connected, ...away]) before.set(w, (await createCall(caller, w.d.userId)).callId);
    await waitUntil('every invitation delivered', () => [...before.keys()].every((w) => w.events.length === 1), 10_000);
    for (const w of away) w.client.stop();
    const oldCursors = new Map(away.map((w) => [w, w.cursor!]));

    redis = await crashAndRestartRedis(redis, { appendOnly: false });

    // Connected devices: the gateway re-reads each log from its cursor and finds another epoch
    // (or the client, reconnecting after its socket failed, does): a reset gap.
    await waitUntil('a reset gap on every connected device', () => connected.every((w) => w.gaps.some((g) => g.reason === 'reset')), 20_000);
    // Away devices resuming with their old cursor: a reset gap too.
    const resumed = away.map((w) => watch(w.d, oldCursors.get(w)));
    await Promise.all(resumed.map((w) => w.client.start()));
    for (const w of resumed) expect(w.gaps.map((g) => g.reason), w.d.userId).toEqual(['reset']);

    // Resync by snapshot: what each device knew is gone with the log.
    for (const w of [...connected, ...away]) expect((await getCall(w.d, before.get(w)!)).status).toBe(404);

    // New events reach every device live, in the new epoch, and nothing of the old log came back.
    const after = new Map<Watched, string>();
    for (const w of [...connected, ...resumed]) after.set(w, (await createCall(caller, w.d.userId)).callId);
    await waitUntil('every new invitation delivered', () => [...after].every(([w, id]) => w.events.some((e) => e.callId === id)), 10_000);
    for (const w of connected) {
      expect(w.events.map((e) => e.callId)).toEqual([before.get(w), after.get(w)]);
      expect(w.gaps.filter((g) => g.reason === 'reset')[0]!.atEvent).toBe(1);
    }
    for (const w of resumed) expect(w.events.map((e) => e.callId)).toEqual([after.get(w)]);
    resumed.forEach((w, i) => expect(w.cursor!.split('_')[0]).not.toBe(oldCursors.get(away[i]!)!.split('_')[0]));
  }, 60_000);
});
