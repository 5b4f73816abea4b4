import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignalingClient, type CallMessage, type EventPayload, type SignalingOptions } from '@calling-backend/client';
import { startStack, type Stack } from '../support/stack.js';
import type { TestServer } from '../support/server.js';
import { answer, device, end, rename, uid, type Device } from '../support/fixtures.js';
import { sleep, waitUntil } from '../support/wait.js';
import { createCall, readAllEvents } from './helpers.js';

/**
 * A reconnect storm, CI-sized (docs/signaling.md "A reconnect storm"): a few hundred devices on
 * two gateway processes, a steady flow of changes (calls starting, answered, renamed, in-call
 * messages, calls ending) made through a separate api/worker process; gateway A is killed with
 * SIGKILL. Its devices come back on gateway B (a load balancer's view: the WebSocket class below
 * routes A's address to B once A is dead) with the client package's backoff and full jitter, and
 * resume by cursor. Checked, per installation, against its log (GET /v1/call-events from the
 * cursor it started at) and against the changes the test made:
 *  - 0 events lost, none handed on twice (repeats are dropped by eventId), no gap;
 *  - each call's events in revision order;
 *  - every device of A resynced within a bound, and B's devices never closed;
 *  - in-call messages of calls still in progress all arrive (fetched after `synced`).
 * How long the storm takes is a figure for the bench, not an assertion here.
 */

const PAIRS = 150; // 300 sockets
/** Every device of A must be synced again within this, from the kill (a bound, not a speed goal). */
const RESYNC_BOUND_MS = 20_000;

let stack: Stack;
let apiServer: TestServer;
let A: TestServer;
let B: TestServer;
let aDead = false;

beforeAll(async () => {
  // The api and worker roles live in their own process, so killing gateway A loses no relay.
  stack = await startStack({ ROLES: 'api,worker' });
  apiServer = stack.servers[0]!;
  [A, B] = await Promise.all([stack.addServer({ ROLES: 'gateway' }), stack.addServer({ ROLES: 'gateway' })]);
}, 90_000);
afterAll(async () => {
  for (const d of devices) d.client.stop();
  await stack?.stop();
});

/**
 * A load balancer in front of the two gateways, as a WebSocket class for one device: once A is
 * dead, A's address leads to B. It also counts the device's event frames at the wire, to tell the
 * repeats the client drops by eventId (early copies followed by the log's, replays) from those it hands on.
 */
function balancedFor(p: Party): NonNullable<SignalingOptions['WebSocket']> {
  return class Balanced extends WebSocket {
    constructor(url: string, protocols?: string | string[], options?: WebSocket.ClientOptions) {
      super(aDead ? url.replace(`:${A.port}/`, `:${B.port}/`) : url, protocols, options);
      this.on('message', (data: Buffer, isBinary: boolean) => {
        if (!isBinary && data.toString('utf8', 0, 15) === '{"type":"event"') p.rawEvents++;
      });
    }
  };
}

interface Party {
  d: Device;
  home: 'A' | 'B';
  client: SignalingClient;
  /** The cursor of its first `synced`: its log is read from here for the reference. */
  startCursor?: string;
  events: EventPayload[];
  messages: CallMessage[];
  gaps: string[];
  closes: { code: number; atMs: number }[];
  synced: number[];
  rawEvents: number;
}
const devices: Party[] = [];

function party(d: Device, home: 'A' | 'B'): Party {
  const p: Party = { d, home, events: [], messages: [], gaps: [], closes: [], synced: [], rawEvents: 0 } as unknown as Party;
  const server = home === 'A' ? A : B;
  const http = (path: string) => fetch(`${apiServer.url}${path}`, { headers: { authorization: `Bearer ${d.token}` } });
  p.client = new SignalingClient({
    url: `ws://127.0.0.1:${server.port}`,
    token: d.token,
    WebSocket: balancedFor(p),
    onEvent: (event) => {
      p.events.push(event);
      // An app follows the in-call messages of the calls it is in.
      if (event.type === 'call.invited' || event.type === 'call.accepted') p.client.followMessages(event.callId);
    },
    onMessage: (m) => p.messages.push(m),
    onGap: (reason) => p.gaps.push(reason),
    onSynced: (cursor) => {
      p.startCursor ??= cursor;
      p.synced.push(Date.now());
    },
    onClose: (code) => p.closes.push({ code, atMs: Date.now() }),
    fetchMessages: async (callId, afterSeq) => (await (await http(`/v1/calls/${callId}/messages?afterSeq=${afterSeq}`)).json()) as { messages: CallMessage[] },
    onError: () => {},
  });
  return p;
}

/** What the test made: each acknowledged change's (callId, revision), and each message sent. */
const changes: { callId: string; revision: number; atMs: number }[] = [];
const sent: { callId: string; seq: number; to: Party }[] = [];
const endedCalls = new Set<string>();

/** One pair's calls, one after the other: create, answer, renames and messages, end. */
async function pairLoop(caller: Party, callee: Party, running: () => boolean): Promise<void> {
  const pace = () => sleep(600 + Math.random() * 900);
  const ack = (callId: string, res: { status: number; json: any }) => {
    expect([200, 201], JSON.stringify(res.json)).toContain(res.status);
    changes.push({ callId, revision: Number(res.json.revision), atMs: Date.now() });
  };
  const callerApi = { ...caller.d, api: via(caller.d) };
  const calleeApi = { ...callee.d, api: via(callee.d) };
  while (running()) {
    const call = await createCall(callerApi, callee.d.userId);
    ack(call.callId, call.res);
    await pace();
    ack(call.callId, await answer(calleeApi, call.callId));
    for (let i = 0; i < 3 && running(); i++) {
      await pace();
      ack(call.callId, await rename(callerApi, call.callId, `Caller ${i}`));
      const m = await callerApi.api.post(`/v1/calls/${call.callId}/messages`, { operationId: uid('op'), payload: { n: i } });
      expect(m.status, m.text).toBe(200);
      sent.push({ callId: call.callId, seq: m.json.seq as number, to: callee });
    }
    if (!running()) return; // left in progress: its messages must all arrive
    await pace();
    ack(call.callId, await end(callerApi, call.callId, 'localHangup'));
    endedCalls.add(call.callId);
  }
}
const via = (d: Device) => device(apiServer.url, d.userId, d.installationId).api;

describe('a reconnect storm: gateway A killed under a steady flow of changes', () => {
  it('every device of A resyncs on B by cursor; nothing lost, nothing handed on twice, each call in order', async () => {
    for (let i = 0; i < PAIRS; i++) {
      // Half the calls span the two gateways, half stay on one.
      const callerHome = i % 2 === 0 ? 'A' : 'B';
      const calleeHome = i % 4 < 2 ? 'A' : 'B';
      devices.push(party(device(apiServer.url), callerHome), party(device(apiServer.url), calleeHome));
    }
    // Connected a few dozen at a time (the start is not what is measured).
    for (let i = 0; i < devices.length; i += 50) await Promise.all(devices.slice(i, i + 50).map((p) => p.client.start()));

    let running = true;
    const loops = Array.from({ length: PAIRS }, (_, i) => pairLoop(devices[2 * i]!, devices[2 * i + 1]!, () => running));
    await sleep(3000);

    aDead = true;
    const killedAt = Date.now();
    process.kill(A.child.pid!, 'SIGKILL');
    const onA = devices.filter((p) => p.home === 'A');
    const onB = devices.filter((p) => p.home === 'B');
    await waitUntil('every device of A synced again on B', () => onA.every((p) => p.synced.some((t) => t > killedAt)), RESYNC_BOUND_MS, { intervalMs: 50 });
    const resyncMs = onA.map((p) => p.synced.find((t) => t > killedAt)! - killedAt).sort((a, b) => a - b);

    // The flow goes on after the storm, then stops; each device must then hold its whole log.
    await sleep(3000);
    running = false;
    await Promise.all(loops);

    const reference = new Map<Party, { eventId: string }[]>();
    await waitUntil(
      'every device holding every event of its log',
      async () => {
        for (const p of devices) {
          if (reference.has(p)) continue;
          const log = (await readAllEvents({ ...p.d, api: via(p.d) }, p.startCursor!)).events;
          const got = new Set(p.events.map((e) => e.eventId));
          if (log.every((e) => got.has(e.eventId))) reference.set(p, log);
        }
        return reference.size === devices.length;
      },
      20_000,
      { intervalMs: 250 },
    );

    for (const p of devices) {
      const name = `${p.home}/${p.d.installationId}`;
      const log = reference.get(p)!;
      // 0 lost, none twice: exactly the log's events (repeats dropped by eventId).
      expect(p.events.map((e) => e.eventId).sort(), name).toEqual(log.map((e) => e.eventId).sort());
      expect(p.gaps, name).toEqual([]);
      // Each call's events in revision order.
      const lastRevision = new Map<string, number>();
      for (const e of p.events) {
        const r = Number(e.revision);
        expect(r, `${name} ${e.callId} ${e.type}`).toBeGreaterThan(lastRevision.get(e.callId) ?? 0);
        lastRevision.set(e.callId, r);
      }
    }
    // B's devices never closed; A's closed once (1006: no close frame from a killed process).
    for (const p of onB) expect(p.closes, p.d.installationId).toEqual([]);
    for (const p of onA) expect(p.closes[0]?.code, p.d.installationId).toBe(1006);

    // Against what was sent: every acknowledged change reached its call's parties.
    const received = new Set(devices.flatMap((p) => p.events.map((e) => `${e.callId}/${e.revision}`)));
    const missing = changes.filter((c) => !received.has(`${c.callId}/${c.revision}`));
    expect(missing).toEqual([]);
    // The flow went on through the storm.
    expect(changes.filter((c) => c.atMs > killedAt).length).toBeGreaterThan(PAIRS);

    // In-call messages of calls still in progress all arrived, each once (live or fetched after `synced`).
    const inProgress = sent.filter((m) => !endedCalls.has(m.callId));
    await waitUntil('the messages of calls in progress', () => inProgress.every((m) => m.to.messages.some((r) => r.callId === m.callId && r.seq === m.seq)), 10_000);
    for (const p of devices) {
      const ids = p.messages.map((m) => m.eventId);
      expect(new Set(ids).size, p.d.installationId).toBe(ids.length);
    }

    const raw = devices.reduce((n, p) => n + p.rawEvents, 0);
    const handed = devices.reduce((n, p) => n + p.events.length, 0);
    const pct = (q: number) => resyncMs[Math.min(resyncMs.length - 1, Math.floor(q * resyncMs.length))];
    console.log(
      `reconnect storm: ${devices.length} sockets (${onA.length} on A), ${changes.length} changes, ${sent.length} messages; ` +
        `A's devices resynced after ${pct(0.5)} / ${pct(0.99)} / ${resyncMs.at(-1)} ms (50/99/100 %); ` +
        `${handed} events handed on, ${raw - handed} repeated event frames at the wire (early copies, replays) dropped by eventId`,
    );
  }, 90_000);
});
