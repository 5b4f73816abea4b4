import { describe, expect, it } from 'vitest';
import type { TestServer } from '../support/server.js';
import { stackForFile, type Stack } from '../support/stack.js';
import { device, uid, type Device } from '../support/fixtures.js';
import { api } from '../support/http.js';
import { connect, type Frame, type SignalingClient } from '../support/ws-client.js';
import { sleep, waitUntil } from '../support/wait.js';

/**
 * In-call messages through faults (docs/signaling.md "In-call messages" and "Commands"): two
 * parties send each other messages as frames, both ways at once, while the gateway of one party
 * and the worker (the relay) are killed with SIGKILL and restarted. A sender retries a message
 * whose reply it did not get with the same operationId (over HTTP while it has no socket). Each
 * receiver takes what its sockets deliver live and, after each reconnect, fetches what it missed
 * by GET /v1/calls/{id}/messages. Afterwards every acknowledged message reached the other side,
 * each eventId once; on each socket the live messages of one sender came in seq order.
 */

const MESSAGES = 60;
let stack: Stack;
/** api+gateway: where both parties' HTTP goes, and Alice's socket. */
let front: TestServer;
/** gateway only: Bob's socket, killed mid-stream. */
let bobGateway: TestServer;
let worker: TestServer;

stackForFile({ ROLES: 'api,gateway', RELAY_CLAIM_IDLE_MS: '2000' }, async (s) => {
  stack = s;
  front = s.servers[0]!;
  [bobGateway, worker] = await Promise.all([s.addServer({ ROLES: 'gateway' }), s.addServer({ ROLES: 'worker', RELAY_CLAIM_IDLE_MS: '2000' })]);
});

interface Received {
  eventId: string;
  seq: number;
  fromInstallationId: string;
}

/** One party: its socket (replaced after each reconnect), what it received, what it sent and got acknowledged. */
class Party {
  ws: SignalingClient | undefined;
  readonly received = new Map<string, Received>();
  /** Per socket connection: the seqs of live messages in arrival order (deduplicated by eventId). */
  readonly liveRuns: number[][] = [];
  readonly acked = new Map<string, number>();
  reconnects = 0;

  constructor(
    readonly d: Device,
    private gateway: () => TestServer,
  ) {}

  async connect(): Promise<void> {
    for (;;) {
      try {
        const ws = await connect(this.gateway().url, this.d.token, { name: this.d.installationId });
        const run: number[] = [];
        this.liveRuns.push(run);
        ws.ws.on('message', (data) => {
          const frame = JSON.parse(String(data)) as Frame;
          if (frame.type !== 'message') return;
          const m = frame.event as Received;
          if (!this.received.has(m.eventId)) run.push(m.seq);
          this.received.set(m.eventId, m);
        });
        this.ws = ws;
        void ws.closed.then(() => {
          if (this.ws === ws) this.ws = undefined;
        });
        return;
      } catch {
        await sleep(100);
      }
    }
  }

  /** Reconnects (the socket dropped), then fetches what it may have missed meanwhile. */
  async recover(callId: string): Promise<void> {
    this.reconnects++;
    await this.connect();
    await this.fetchMissed(callId);
  }

  async fetchMissed(callId: string): Promise<void> {
    const res = await api(front.url, this.d.token).get(`/v1/calls/${callId}/messages?afterSeq=0`);
    expect(res.status, res.text).toBe(200);
    for (const m of res.json.messages as Received[]) this.received.set(m.eventId, m);
  }

  /** Sends one message until it is acknowledged: as a frame while the socket is up, else over HTTP; same operationId. */
  async send(callId: string, n: number): Promise<void> {
    const operationId = uid('op');
    const payload = { n, from: this.d.installationId };
    for (let attempt = 0; attempt < 200; attempt++) {
      try {
        if (this.ws && !this.ws.closeInfo) {
          const reply = await this.ws.command({ type: 'message', callId, operationId, payload }, 2000);
          if (reply.status === 200) {
            this.acked.set((reply.body as { eventId: string }).eventId, n);
            return;
          }
        } else {
          const res = await api(front.url, this.d.token).post(`/v1/calls/${callId}/messages`, { operationId, payload });
          if (res.status === 200) {
            this.acked.set(res.json.eventId as string, n);
            return;
          }
        }
      } catch {
        /* no reply: the socket dropped or the process is down; retry */
      }
      await sleep(50);
    }
    throw new Error(`message ${n} of ${this.d.installationId} never acknowledged`);
  }
}

describe('in-call messages under SIGKILL', () => {
  it('kill -9 of the receiving gateway and of the relay while messages flow both ways: every acknowledged message arrives once, in seq order per socket', async () => {
    const alice = new Party(device(front.url, uid('alice'), uid('alice-phone'), 'Alice'), () => front);
    // Bob's socket is on the gateway that dies; he reconnects to the front process meanwhile.
    let bobTarget: () => TestServer = () => bobGateway;
    const bob = new Party(device(front.url, uid('bob'), uid('bob-phone'), 'Bob'), () => bobTarget());
    await Promise.all([alice.connect(), bob.connect()]);

    const callId = crypto.randomUUID();
    const created = await alice.d.api.post('/v1/calls', { callId, calleeUserId: bob.d.userId, operationId: uid('op') });
    expect(created.status, created.text).toBe(201);
    const answered = await bob.d.api.post(`/v1/calls/${callId}/answer`, { operationId: uid('op'), installationId: bob.d.installationId });
    expect(answered.status, answered.text).toBe(200);

    // Reconnect whoever lost their socket, for as long as the senders run.
    let sending = true;
    const keeper = (async () => {
      while (sending) {
        for (const p of [alice, bob]) if (!p.ws) await p.recover(callId);
        await sleep(20);
      }
    })();
    const sender = (p: Party) =>
      (async () => {
        for (let n = 1; n <= MESSAGES; n++) await p.send(callId, n);
      })();
    const senders = [sender(alice), sender(bob)];

    await waitUntil('a third of the messages acknowledged', () => alice.acked.size + bob.acked.size >= (2 * MESSAGES) / 3, 20_000);
    bobGateway.child.kill('SIGKILL');
    worker.child.kill('SIGKILL');
    bobTarget = () => front;
    await sleep(300);
    [bobGateway, worker] = await Promise.all([stack.addServer({ ROLES: 'gateway' }), stack.addServer({ ROLES: 'worker', RELAY_CLAIM_IDLE_MS: '2000' })]);
    await Promise.all(senders);
    sending = false;
    await keeper;

    // What arrives late (through a relay that took the shard over) still counts: wait for it, then
    // fetch once more as a device does after a reconnect.
    for (const [receiver, sender] of [
      [bob, alice],
      [alice, bob],
    ] as const) {
      await waitUntil(`every acknowledged message of ${sender.d.installationId} at ${receiver.d.installationId}`, async () => {
        await receiver.fetchMissed(callId);
        return [...sender.acked.keys()].every((id) => receiver.received.has(id));
      }, 20_000);
      const fromSender = [...receiver.received.values()].filter((m) => m.fromInstallationId === sender.d.installationId);
      // Each message once (by eventId), and nothing that was not sent: seqs 1..n without repeats.
      expect(fromSender.map((m) => m.seq).sort((a, b) => a - b)).toEqual(Array.from({ length: fromSender.length }, (_, i) => i + 1));
      expect(fromSender.length).toBe(sender.acked.size);
      for (const run of receiver.liveRuns) expect(run, 'live messages on one socket, in seq order').toEqual([...run].sort((a, b) => a - b));
    }
    expect(bob.reconnects).toBeGreaterThanOrEqual(1);
    await Promise.all([alice.ws?.ws.close(), bob.ws?.ws.close()]);
  }, 120_000);
});
