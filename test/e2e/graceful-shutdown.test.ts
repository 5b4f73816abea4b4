import { waitUntil, within } from '../support/wait.js';
import { randomUUID } from 'node:crypto';
import { connect as tcpConnect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Pool } from 'undici';
import { startStack, type Stack } from '../support/stack.js';
import type { TestServer } from '../support/server.js';
import { device, sleep, uid, type Device } from '../support/fixtures.js';
import type { ApiResponse } from '../support/http.js';
import { closeAll, connect, type CloseInfo, type SignalingClient } from '../support/ws-client.js';
import { keys } from '../../src/redis/keys.js';
import { storedCallFields } from '../support/callRecords.js';

/**
 * SIGTERM under traffic: the server stops taking connections, lets what it accepted finish,
 * closes every WebSocket with 1001 and the documented reason, and exits 0 within
 * SHUTDOWN_TIMEOUT_MS. Whatever it acknowledged (a response below 500) is in Redis afterwards;
 * requests that failed with a connection error were never acknowledged and may or may not have
 * happened.
 */

const SHUTDOWN_TIMEOUT_MS = 8_000;
/** Process start-up/teardown noise on a loaded 2-core machine. */
const EXIT_MARGIN_MS = 4_000;
const GOING_AWAY: CloseInfo = { code: 1001, reason: 'server shutting down; reconnect with your cursor' };
const KS = { prefix: 'cb', shards: 8 };

type Op = 'create' | 'answer' | 'end';
interface Outcome {
  op: Op;
  callId: string;
  loop: number;
  /** undefined: connection error (never acknowledged). */
  res?: ApiResponse;
  error?: string;
}

let stack: Stack | undefined;
const sockets: SignalingClient[] = [];

afterEach(async () => {
  await closeAll(sockets.splice(0));
  await stack?.stop();
  stack = undefined;
});

function exitOf(server: TestServer): Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }> {
  const { child } = server;
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode, atMs: Date.now() });
  }
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal, atMs: Date.now() })));
}

const acknowledged = (o: Outcome): o is Outcome & { res: ApiResponse } => o.res !== undefined && o.res.status < 500;

describe('SIGTERM', () => {
  it('under traffic: sockets get 1001, the process exits 0 in time, and every acknowledged change is stored', async () => {
    // A drain period: readiness is seen to turn 503 while the server still answers.
    stack = await startStack({ SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS), SHUTDOWN_DRAIN_MS: '300' });
    const server = stack.servers[0]!;
    const url = server.url;
    const exited = exitOf(server);

    // Four callers online (they receive call.accepted during the traffic), two idle watchers.
    const callers = Array.from({ length: 4 }, (_, i) => device(url, uid(`caller${i}`), uid('phone')));
    const watchers = Array.from({ length: 2 }, () => device(url));
    for (const d of [...callers, ...watchers]) sockets.push(await connect(url, d.token, { name: d.userId }));
    const closes = sockets.map((s) => s.closed);

    // Readiness, polled over one kept-alive connection opened before the SIGTERM (new
    // connections are refused once the listen socket is closed).
    const readyPool = new Pool(url, { connections: 1, pipelining: 1 });
    const readiness: { status: number; body: string }[] = [];
    let pollReady = true;
    const readyPoller = (async () => {
      while (pollReady) {
        try {
          const r = await readyPool.request({ path: '/readyz', method: 'GET' });
          readiness.push({ status: r.statusCode, body: await r.body.text() });
        } catch {
          break; // the connection went away with the process
        }
        await sleep(10);
      }
    })();

    const outcomes: Outcome[] = [];
    let stopTraffic = false;
    const attempt = async (loop: number, op: Op, callId: string, send: () => Promise<ApiResponse>): Promise<ApiResponse | undefined> => {
      try {
        const res = await send();
        outcomes.push({ op, callId, loop, res });
        return res.status < 500 ? res : undefined;
      } catch (err) {
        outcomes.push({ op, callId, loop, error: String((err as Error).cause ?? err) });
        return undefined;
      }
    };
    const loop = async (i: number) => {
      const caller = callers[i]!;
      while (!stopTraffic) {
        const callee: Device = device(url);
        const callId = randomUUID();
        const created = await attempt(i, 'create', callId, () =>
          caller.api.post('/v1/calls', { callId, calleeUserId: callee.userId, operationId: uid('op') }),
        );
        if (!created) return;
        const answered = await attempt(i, 'answer', callId, () =>
          callee.api.post(`/v1/calls/${callId}/answer`, { operationId: uid('op'), installationId: callee.installationId }),
        );
        if (!answered) return;
        const ended = await attempt(i, 'end', callId, () => caller.api.post(`/v1/calls/${callId}/end`, { operationId: uid('op'), reason: 'localHangup' }));
        if (!ended) return;
      }
    };
    const traffic = Promise.all([0, 1, 2, 3].map(loop));

    // In the middle of the traffic…
    await waitUntil('40 acknowledged ends in the traffic', () => outcomes.filter((o) => o.op === 'end' && acknowledged(o)).length >= 40, 15_000, {
      intervalMs: 10,
      detail: () => `${outcomes.length} outcomes`,
    });
    expect(server.child.kill('SIGTERM')).toBe(true);

    // …the process exits cleanly and in time (the wait fails past SHUTDOWN_TIMEOUT_MS).
    const exit = await within(SHUTDOWN_TIMEOUT_MS + EXIT_MARGIN_MS, 'the exit after SIGTERM', exited);
    stopTraffic = true;
    expect({ code: exit.code, signal: exit.signal }, server.logs()).toEqual({ code: 0, signal: null });
    expect(server.logs()).toMatch(/"signal":"SIGTERM".*"msg":"shutting down"|"msg":"shutting down".*"signal":"SIGTERM"/);

    // Every socket was closed by the server with 1001 and the documented reason.
    const closeInfos = await Promise.race([
      Promise.all(closes),
      sleep(5_000).then(() => {
        throw new Error('sockets not closed within 5 s of the exit');
      }),
    ]);
    expect(closeInfos).toEqual(sockets.map(() => GOING_AWAY));

    await traffic;
    pollReady = false;
    await readyPoller;
    await readyPool.destroy().catch(() => {});

    // Readiness: ready before the signal, then not ready (503) through the drain, never ready again.
    expect(readiness[0]).toEqual({ status: 200, body: JSON.stringify({ status: 'ready', redis: true, accepting: true }) });
    const firstNotReady = readiness.findIndex((r) => r.status !== 200);
    expect(firstNotReady, JSON.stringify(readiness.slice(-5))).toBeGreaterThan(0);
    for (const r of readiness.slice(firstNotReady)) {
      expect(r.status).toBe(503);
      expect(JSON.parse(r.body)).toMatchObject({ status: 'not ready', accepting: false });
    }

    // What the server acknowledged: only the expected successes (no 4xx under clean traffic).
    const acked = outcomes.filter(acknowledged);
    expect(acked.length).toBeGreaterThanOrEqual(120);
    const unexpected = acked.filter((o) => o.res.status !== (o.op === 'create' ? 201 : 200));
    expect(unexpected.map((o) => `${o.op} ${o.res.status} ${o.res.text}`)).toEqual([]);
    // Everything else failed at the connection (or with a 5xx while Redis was being closed).
    for (const o of outcomes.filter((x) => !acknowledged(x))) {
      if (o.res) expect(o.res.status, o.res.text).toBe(503);
      else expect(o.error).toBeTruthy();
    }
    // A request the server started handling is answered before the connections are closed, so
    // one that failed at the connection was never applied (a client retry with the same
    // operationId would be safe either way).
    for (const o of outcomes.filter((x) => !acknowledged(x))) {
      const { state = null, revision = null } = await storedCallFields(stack.redis, keys.call(KS, o.callId));
      const before = { create: [null, null], answer: ['ringing', '1'], end: ['accepted', '2'] }[o.op];
      expect([state, revision], `unacknowledged ${o.op} of ${o.callId} (${o.error ?? o.res?.status}) was applied`).toEqual(before);
    }
    // Each loop stopped at its first unacknowledged request.
    for (let i = 0; i < 4; i++) {
      const mine = outcomes.filter((o) => o.loop === i);
      expect(mine.slice(0, -1).every(acknowledged), `loop ${i}`).toBe(true);
    }

    // Every acknowledged change is stored, checked directly in Redis.
    const lastAcked = new Map<string, Op>();
    for (const o of acked) lastAcked.set(o.callId, o.op);
    for (const [callId, op] of lastAcked) {
      const call = await storedCallFields(stack.redis, keys.call(KS, callId));
      const context = `${callId} (last acknowledged: ${op}): ${JSON.stringify(call)}`;
      expect(call.callId, context).toBe(callId);
      if (op === 'create') {
        // The answer may have happened without being acknowledged; nothing after it was sent.
        expect(['ringing', 'accepted'], context).toContain(call.state);
      } else if (op === 'answer') {
        expect(['accepted', 'ended'], context).toContain(call.state);
        expect(call.answeredByInstallationId, context).toBeTruthy();
      } else {
        expect(call.state, context).toBe('ended');
        expect(call.revision, context).toBe('3');
        expect(call.endReason, context).toBe('localHangup');
        expect(call.answeredByInstallationId, context).toBeTruthy();
      }
    }

    // And through the API of a new server on the same Redis, which also relays whatever the
    // first one left in the outbox.
    const next = await stack.addServer();
    for (const o of acked.filter((x) => x.op === 'create')) {
      const caller = callers[o.loop]!;
      const res = await fetch(`${next.url}/v1/calls/${o.callId}`, { headers: { authorization: `Bearer ${caller.token}` } });
      expect(res.status).toBe(200);
      const snap = (await res.json()) as { state: string; revision: string; endReason?: string };
      const op = lastAcked.get(o.callId)!;
      if (op === 'end') expect(snap).toMatchObject({ state: 'ended', revision: '3', endReason: 'localHangup' });
      else if (op === 'answer') expect(['accepted', 'ended']).toContain(snap.state);
      else expect(['ringing', 'accepted']).toContain(snap.state);
    }
    const outboxLen = async () => {
      let n = 0;
      for (let s = 0; s < KS.shards; s++) n += await stack!.redis.xlen(keys.outboxForShard(KS, s));
      return n;
    };
    await waitUntil('the second server to drain the outbox', async () => (await outboxLen()) === 0, 15_000, {
      intervalMs: 100,
      detail: async () => `${await outboxLen()} entries`,
    });
  }, 90_000);

  it('an upload the client abandoned half-way does not hold up the shutdown', async () => {
    // A drain period: readiness is seen to turn 503 while the server still answers.
    stack = await startStack({ SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS), SHUTDOWN_DRAIN_MS: '300' });
    const server = stack.servers[0]!;
    const exited = exitOf(server);
    const d = device(server.url);
    const ws = await connect(server.url, d.token, { name: 'online' });
    sockets.push(ws);

    // Headers and half the declared body, then the client goes away.
    const body = JSON.stringify({ callId: randomUUID(), calleeUserId: uid('callee'), operationId: uid('op') });
    await new Promise<void>((resolve, reject) => {
      const socket = tcpConnect(server.port, '127.0.0.1', () => {
        socket.write(
          `POST /v1/calls HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${d.token}\r\n` +
            `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 10)}`,
          () => setTimeout(() => {
            socket.destroy();
            resolve();
          }, 200),
        );
      });
      socket.on('error', reject);
    });
    await sleep(200);

    server.child.kill('SIGTERM');
    const exit = await within(SHUTDOWN_TIMEOUT_MS, 'the exit after SIGTERM', exited);
    expect({ code: exit.code, signal: exit.signal }, server.logs()).toEqual({ code: 0, signal: null });
    expect(await ws.closed).toEqual(GOING_AWAY);
  }, 60_000);
});
