import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHaproxy, type Haproxy, type ServerState } from '../support/haproxy.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { startServer, type TestServer } from '../support/server.js';
import { answer, device, end, ringingCall, type Device } from '../support/fixtures.js';
import { closeAll, connect, type SignalingClient } from '../support/ws-client.js';
import { scrapeMetrics, total } from '../support/exposition.js';
import { waitUntil } from '../support/wait.js';

/**
 * The shipped proxy (deploy/haproxy/haproxy.cfg, Debian's haproxy) in front of two real server
 * processes, as docker-compose.yml runs it: its health checks bring both servers UP, HTTP requests
 * and WebSocket upgrades are spread over both, a server that drains on SIGTERM is taken out by its
 * /readyz before it stops listening, and a killed one loses no request and is out within the
 * documented time (docs/operations.md "Health checks").
 */

/** As docker-compose.yml sets it for the api replicas. */
const SERVER_ENV = { SHUTDOWN_DRAIN_MS: '6000' };
/** docs/operations.md "Health checks": out of rotation within 6 s (2 checks 2 s apart, each allowed 2 s). */
const OUT_OF_ROTATION_MS = 6_000;
/** What polling haproxy's admin socket adds to that on a busy machine. */
const POLL_MARGIN_MS = 2_000;

let redis: RedisServer;
let proxy: Haproxy;
const servers = new Map<string, TestServer>();
const sockets: SignalingClient[] = [];

beforeAll(async () => {
  redis = await startRedis();
  for (const name of ['api-1', 'api-2']) servers.set(name, await startServer({ REDIS_URL: redis.url, ...SERVER_ENV }));
  proxy = await startHaproxy(Object.fromEntries([...servers].map(([name, s]) => [name, s.port])));
}, 60_000);

afterAll(async () => {
  await closeAll(sockets);
  await proxy?.stop();
  await Promise.all([...servers.values()].map((s) => s.stop()));
  await redis?.stop();
});

const server = (name: string) => servers.get(name)!;

/** Waits until haproxy's own view of the servers satisfies `ok`; on timeout, shows that view. */
async function serversUntil(what: string, ok: (s: Map<string, ServerState>) => boolean, timeoutMs: number): Promise<Map<string, ServerState>> {
  let last = new Map<string, ServerState>();
  try {
    await waitUntil(what, async () => ok((last = new Map((await proxy.servers()).map((s) => [s.name, s])))), timeoutMs);
  } catch (err) {
    throw new Error(`${(err as Error).message}; haproxy: ${JSON.stringify([...last.values()])}\n${proxy.logs().slice(-2000)}`);
  }
  return last;
}

const upByReadyz = (s: ServerState | undefined) => s?.status === 'UP' && s.checkStatus === 'L7OK' && s.checkCode === '200';

/** API requests a server answered (health checks on /readyz and /healthz left out). */
async function apiRequests(s: TestServer): Promise<number> {
  const e = await scrapeMetrics(s.metricsUrl);
  return e.samples.filter((x) => x.name === 'calling_http_requests_total' && !['/readyz', '/healthz'].includes(x.labels.route ?? '')).reduce((n, x) => n + x.value, 0);
}

const openSockets = async (s: TestServer) => total(await scrapeMetrics(s.metricsUrl), 'calling_ws_open_sockets');

async function openThroughProxy(devices: Device[]): Promise<SignalingClient[]> {
  const opened: SignalingClient[] = [];
  for (const d of devices) opened.push(await connect(proxy.url, d.token, { name: d.installationId }));
  sockets.push(...opened);
  return opened;
}

/** Sends requests through the proxy one after another until `stop` resolves; every outcome. */
async function requestsUntil(d: Device, callId: string, stop: Promise<unknown>): Promise<(number | string)[]> {
  let stopped = false;
  void stop.then(() => (stopped = true));
  const outcomes: (number | string)[] = [];
  while (!stopped) outcomes.push(await d.api.get(`/v1/calls/${callId}`).then((r) => r.status, (err: Error) => err.message));
  return outcomes;
}

describe('deploy/haproxy/haproxy.cfg in front of two servers', () => {
  it('brings both servers UP by their /readyz checks, and /readyz and /healthz answer through it', async () => {
    await serversUntil('both servers UP by a 200 from /readyz', (s) => upByReadyz(s.get('api-1')) && upByReadyz(s.get('api-2')), 15_000);
    const ready = await fetch(`${proxy.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ready', redis: true, accepting: true });
    expect((await fetch(`${proxy.url}/healthz`)).status).toBe(200);
  });

  it('spreads HTTP requests and WebSocket upgrades over both servers, and a call goes through', async () => {
    // leastconn: with no socket held, requests take turns.
    const before = await Promise.all([...servers.values()].map(apiRequests));
    const caller = device(proxy.url);
    const callee = device(proxy.url);
    const { callId } = await ringingCall(proxy.url, caller, callee);
    const reads = 10;
    for (let i = 0; i < reads; i++) expect((await caller.api.get(`/v1/calls/${callId}`)).status).toBe(200);
    expect((await answer(callee, callId)).status).toBe(200);
    expect((await end(caller, callId, 'localHangup')).status).toBe(200);
    const served = (await Promise.all([...servers.values()].map(apiRequests))).map((n, i) => n - before[i]!);
    expect(served.every((n) => n > 0), `requests per server: ${served.join(', ')}`).toBe(true);
    expect(served.reduce((a, b) => a + b)).toBe(3 + reads);

    const [calleeWs] = await openThroughProxy([callee, caller, device(proxy.url), device(proxy.url), device(proxy.url), device(proxy.url)]);
    const perServer = await Promise.all([...servers.values()].map(openSockets));
    expect(perServer.every((n) => n > 0), `sockets per server: ${perServer.join(', ')}`).toBe(true);
    expect(perServer.reduce((a, b) => a + b)).toBe(6);
    // Events reach a device through the proxy, whichever server made the change.
    const second = await ringingCall(proxy.url, caller, callee);
    expect((await calleeWs!.next('event')).event).toMatchObject({ type: 'call.invited', callId: second.callId });
    expect((await end(caller, second.callId, 'localHangup')).status).toBe(200);
  });

  it('honours the drain on SIGTERM: haproxy takes the server out on its 503 from /readyz while it still serves, and no request fails', async () => {
    const d = device(proxy.url);
    const { callId } = await ringingCall(proxy.url, d);
    const draining = server('api-2');
    const exited = new Promise<number | null>((r) => draining.child.once('exit', (code) => r(code)));
    const open = sockets.filter((s) => s.closeInfo === undefined);
    const onDraining = await openSockets(draining);
    expect(onDraining).toBeGreaterThan(0);
    const outcomes = requestsUntil(d, callId, exited);
    draining.child.kill('SIGTERM');

    const seen = await serversUntil('api-2 taken out of rotation', (s) => s.get('api-2')?.status.startsWith('DOWN') === true, OUT_OF_ROTATION_MS + POLL_MARGIN_MS);
    // Taken out on the readiness answer, not on a refused connection: it was still serving.
    expect(seen.get('api-2')).toMatchObject({ checkStatus: 'L7STS', checkCode: '503' });
    expect(draining.child.exitCode).toBe(null);
    expect(upByReadyz(seen.get('api-1'))).toBe(true);

    expect(await exited).toBe(0);
    expect((await outcomes).filter((o) => o !== 200)).toEqual([]);
    // Its WebSockets were told to reconnect (1001), through the proxy; the others stay open.
    await waitUntil('the draining server\'s sockets closed', () => open.filter((s) => s.closeInfo !== undefined).length >= onDraining, 5_000);
    const closed = open.filter((s) => s.closeInfo !== undefined);
    expect(closed.length).toBe(onDraining);
    for (const s of closed) expect(s.closeInfo).toEqual({ code: 1001, reason: 'server shutting down; reconnect with your cursor' });
    expect(await openSockets(server('api-1'))).toBe(open.length - closed.length);
  });

  it('a restarted server comes back; a killed one loses no request and is out within the documented time', async () => {
    await closeAll(sockets.splice(0));
    // The replica comes back (on another port here: a new container may get another address).
    servers.set('api-2', await startServer({ REDIS_URL: redis.url, ...SERVER_ENV }));
    await proxy.moveServer('api-2', server('api-2').port);
    await serversUntil('api-2 UP again', (s) => upByReadyz(s.get('api-2')), 15_000);
    const devices = Array.from({ length: 6 }, () => device(proxy.url));
    await openThroughProxy(devices);
    expect(await openSockets(server('api-2'))).toBeGreaterThan(0);

    const d = device(proxy.url);
    const { callId } = await ringingCall(proxy.url, d);
    const killed = server('api-1');
    const onKilled = await openSockets(killed);
    expect(onKilled).toBeGreaterThan(0);
    const gone = new Promise((r) => killed.child.once('exit', r));
    killed.child.kill('SIGKILL');
    await gone;
    // Requests that meet the dead server's refused connection are retried on the other one.
    for (let i = 0; i < 20; i++) expect((await d.api.get(`/v1/calls/${callId}`)).status).toBe(200);
    const seen = await serversUntil('api-1 out of rotation', (s) => s.get('api-1')?.status.startsWith('DOWN') === true, OUT_OF_ROTATION_MS + POLL_MARGIN_MS);
    expect(seen.get('api-1')?.checkStatus).toBe('L4CON');

    // Its devices reconnect through the proxy and land on the survivor.
    const held = sockets.slice();
    await waitUntil('the killed server\'s sockets dropped', () => held.filter((s) => s.closeInfo !== undefined).length >= onKilled, 5_000);
    const dropped = devices.filter((_, i) => held[i]!.closeInfo !== undefined);
    expect(dropped.length).toBe(onKilled);
    await openThroughProxy(dropped);
    expect(await openSockets(server('api-2'))).toBe(devices.length);
  });
});
