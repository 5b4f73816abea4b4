import { randomUUID } from 'node:crypto';
import { io as ioClient, type Socket as IoSocket } from 'socket.io-client';
import type { EventPayload } from '../../src/events/payloads.js';
import { nowMs, sleep, sleepUntil } from '../lib/clock.js';
import { HistogramSet, type SerializedHistogram } from '../lib/histogram.js';
import { JsonHttp } from '../lib/http.js';
import { openLoop } from '../lib/openLoop.js';
import { mapLimit, openDeviceSocket, type DeviceSocket } from '../lib/signaling.js';
import { device, type Device } from '../lib/users.js';
import { BenchFailure, countInto, Waiter } from '../lib/waiter.js';
import type { Task } from './tasks.js';

/**
 * The event-delivery workload, the same for both systems: N users, each with one authenticated
 * socket on process B; events for users are posted over HTTP to process A and must arrive on the
 * user's socket on B, through Redis.
 *  - calling: the real path of an event. Set-up gives every user an accepted call (created by a
 *    caller, answered by the user's device). Each event is `POST /v1/calls/{id}/rename` on A (the
 *    API) → renameCall.lua (state, revision, idempotency record, outbox, atomically) → relay (on
 *    A) → appendEvents.lua (event log + PUBLISH) → gateway B → `call.renamed` on the socket. A
 *    rename is the lightest change that produces an event: a call creation would also pay for
 *    its ring timer and busy check, which are not event delivery.
 *  - socketio: `POST /v1/events` on A → `io.to('user:<id>').emit()` → Redis adapter → B → socket.
 * Each delivery is timed from sending the HTTP request to the event's arrival.
 */

export interface DeliverySetup {
  system: 'calling' | 'socketio';
  /** Process A: where events are posted. */
  publishUrl: string;
  /** Process B: where the sockets are (http:// base). */
  socketUrl: string;
  secret: string;
  tag: string;
  gen: number;
  users: number;
  localAddresses: string[];
}

export type DeliveryRun =
  | { mode: 'closed'; concurrency: number; durationMs: number; startAtMs: number; timeoutMs: number }
  | { mode: 'open'; rate: number; durationMs: number; startAtMs: number; timeoutMs: number };

export interface DeliveryResult {
  done: number;
  started: number;
  errors: Record<string, number>;
  hist: Record<string, SerializedHistogram>;
  spanMs: number;
}

export function createTask(): Task {
  let s: DeliverySetup;
  let http: JsonHttp;
  let receivers: Device[] = [];
  let callers: Device[] = [];
  /** calling: each receiver's accepted call. */
  let callIds: string[] = [];
  const sockets: (DeviceSocket | IoSocket)[] = [];
  const waiting = new Map<string, { w: Waiter; at: number }>();
  let seq = 0;

  const arrived = (key: string, at: number) => waiting.get(key)?.w.fire(at);

  return {
    async setup(raw) {
      s = raw as DeliverySetup;
      http = new JsonHttp(s.publishUrl, { connections: 32, timeoutMs: 10_000 });
      receivers = Array.from({ length: s.users }, (_, i) => device(s.secret, `${s.tag}-dv${s.gen}-${i}`, `${s.tag}-dv${s.gen}-${i}-phone`));
      callers = Array.from({ length: 64 }, (_, i) => device(s.secret, `${s.tag}-dc${s.gen}-${i}`, `${s.tag}-dc${s.gen}-${i}-phone`, 'Bench Caller'));
      const wsBase = s.socketUrl.replace(/^http/, 'ws');
      await mapLimit(receivers, 64, async (d, i) => {
        const localAddress = s.localAddresses[i % s.localAddresses.length]!;
        if (s.system === 'calling') {
          sockets.push(await openDeviceSocket({ wsBase, token: d.token, localAddress, onEvent: (ev: EventPayload, at) => ev.type === 'call.renamed' && arrived(ev.displayName, at) }));
        } else {
          sockets.push(await openIo(s.socketUrl, d.token, localAddress, (ev, at) => arrived(String(ev.eventId), at)));
        }
      });
      if (s.system === 'calling') {
        callIds = receivers.map((_, i) => `${s.tag}-dcall${s.gen}-${i}`);
        await mapLimit(receivers, 32, async (d, i) => {
          const caller = callers[i % callers.length]!;
          const created = await http.post('/v1/calls', caller.token, { callId: callIds[i], calleeUserId: d.userId, operationId: randomUUID(), video: false });
          if (created.status !== 201) throw new Error(`set-up: create answered HTTP ${created.status}`);
          const answered = await http.post(`/v1/calls/${callIds[i]}/answer`, d.token, { installationId: d.installationId, operationId: randomUUID() });
          if (answered.status !== 200) throw new Error(`set-up: answer answered HTTP ${answered.status}`);
        });
      }
      return { sockets: sockets.length };
    },

    async run(raw, progress) {
      const r = raw as DeliveryRun;
      const hist = new HistogramSet();
      const errors: Record<string, number> = {};
      let done = 0;
      let started = 0;
      let lastDone = r.startAtMs;

      const deliver = async (from: number): Promise<void> => {
        const i = seq++;
        const n = i % receivers.length;
        const to = receivers[n]!;
        const key = `${s.tag}.${s.gen}.${i}`;
        const w = new Waiter();
        waiting.set(key, { w, at: from });
        started++;
        try {
          const t0 = nowMs();
          const res =
            s.system === 'calling'
              ? await http.post(`/v1/calls/${callIds[n]}/rename`, callers[n % callers.length]!.token, { displayName: key, operationId: randomUUID() })
              : await http.post('/v1/events', callers[i % callers.length]!.token, { toUserId: to.userId, event: invitationLike(key) });
          if (res.status !== 200 && res.status !== 202) throw new BenchFailure(`publish: HTTP ${res.status}`);
          hist.get('publish (HTTP)').recordMs(nowMs() - t0);
          const at = await w.wait();
          hist.get('delivery (send → socket)').recordMs(at - from);
          done++;
          lastDone = Math.max(lastDone, at);
        } catch (err) {
          countInto(errors, err instanceof BenchFailure ? err.key : (err as Error).message.slice(0, 60));
        } finally {
          waiting.delete(key);
        }
      };
      const sweeper = setInterval(() => {
        const limit = nowMs() - r.timeoutMs;
        for (const { w, at } of waiting.values()) if (at < limit) w.fail(new BenchFailure(`timeout: not delivered within ${r.timeoutMs} ms`));
      }, 250);
      const ticker = setInterval(() => progress({ done, errors: Object.values(errors).reduce((a, b) => a + b, 0) }), 1000);
      if (r.mode === 'closed') {
        await sleepUntil(r.startAtMs);
        const end = r.startAtMs + r.durationMs;
        await Promise.all(
          Array.from({ length: r.concurrency }, async () => {
            while (nowMs() < end) await deliver(nowMs());
          }),
        );
      } else {
        const running = new Set<Promise<void>>();
        await openLoop(r.rate, r.durationMs, r.startAtMs, (_seq, sched) => {
          const p = deliver(sched);
          running.add(p);
          void p.finally(() => running.delete(p));
        });
        const deadline = nowMs() + r.timeoutMs + 1000;
        while (running.size > 0 && nowMs() < deadline) await Promise.race([...running, sleep(100)]);
      }
      clearInterval(sweeper);
      clearInterval(ticker);
      return { done, started, errors, hist: hist.serialize(), spanMs: lastDone - r.startAtMs } satisfies DeliveryResult;
    },

    async teardown() {
      for (const so of sockets) 'ws' in so ? so.close() : so.disconnect();
      await http?.close();
    },
  };
}

/** A payload the size and shape of a `call.invited` event, for the Socket.IO side. */
function invitationLike(id: string): Record<string, unknown> {
  const now = Date.now();
  return {
    schemaVersion: 1,
    type: 'call.invited',
    callId: id,
    displayName: 'Bench Caller',
    handle: 'app:bench-caller',
    eventId: id,
    revision: '1',
    issuedAtMs: now,
    expiresAtMs: now + 45_000,
    video: false,
  };
}

function openIo(url: string, token: string, localAddress: string, onEvent: (ev: { eventId?: unknown }, at: number) => void): Promise<IoSocket> {
  return new Promise((resolve, reject) => {
    const socket = ioClient(url, {
      transports: ['websocket'],
      auth: { token },
      reconnection: false,
      forceNew: true,
      timeout: 30_000,
      // Passed through to the `ws` client of engine.io-client in Node.
      localAddress,
    } as Parameters<typeof ioClient>[1]);
    socket.on('event', (ev: { eventId?: unknown }) => onEvent(ev, nowMs()));
    socket.once('connect', () => resolve(socket));
    socket.once('connect_error', (err) => reject(err));
  });
}
