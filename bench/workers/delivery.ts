import { randomUUID } from 'node:crypto';
import { io as ioClient, type Socket as IoSocket } from 'socket.io-client';
import { nowMs } from '../lib/clock.js';
import { HistogramSet, type SerializedHistogram } from '../lib/histogram.js';
import { JsonHttp } from '../lib/http.js';
import { driveLoad } from '../lib/openLoop.js';
import { mapLimit, openDeviceSocket, type DeviceSocket } from '../lib/signaling.js';
import { device, type Device } from '../lib/users.js';
import { BenchFailure, countInto, Waiter } from '../lib/waiter.js';
import type { Task } from './task.js';

/**
 * The workload of the `compare` scenario (bench/README.md): pairs of users, the caller's device
 * with a socket on process A, the callee's on process B, the same for both systems.
 *  - `message` (both systems): the caller's device sends an in-call message and the callee's
 *    device receives it, socket to socket through Redis. calling: a `message` frame on A's
 *    gateway (docs/signaling.md "Client → server frames") → lua/sendMessage.lua (the call's
 *    message stream, seq, idempotency record, outbox) → relay → PUBLISH → gateway B → `message`
 *    frame (docs/signaling.md "In-call messages"); every pair has an accepted call, set up first.
 *    socketio: `emit('message', {toUserId, payload}, ack)` on A → room `user:<callee>` through
 *    the Redis adapter → B → `message` on the callee's socket.
 *  - `rename` (calling only): the durable path of an event, `POST /v1/calls/{id}/rename` on A →
 *    renameCall.lua (state, revision, idempotency record, outbox) → relay → appendEvents.lua
 *    (the callee's event log + PUBLISH) → gateway B → `call.renamed`.
 * A message's payload is an ICE candidate the size a browser sends, carrying the bench's key and
 * its send time (in the open loop, the scheduled one): latency is arrival − that time.
 */

export type DeliveryKind = 'message' | 'rename';

export interface DeliverySetup {
  system: 'calling' | 'socketio';
  /** Process A: the callers' sockets; calling: also the API the calls are set up and renamed on. */
  aUrl: string;
  /** Process B: the callees' sockets. */
  bUrl: string;
  secret: string;
  tag: string;
  gen: number;
  pairs: number;
  localAddresses: string[];
}

export type DeliveryRun = ({ mode: 'closed'; concurrency: number } | { mode: 'open'; rate: number }) & {
  kind: DeliveryKind;
  durationMs: number;
  startAtMs: number;
  timeoutMs: number;
};

export interface DeliveryResult {
  done: number;
  started: number;
  errors: Record<string, number>;
  hist: Record<string, SerializedHistogram>;
  spanMs: number;
}

/** The latency every run records: send (or scheduled send) → arrival on the callee's socket. */
export const DELIVERY = 'delivery (send → socket)';

/** A trickle-ICE candidate as a browser sends it, with the bench's key and send time. */
export function iceCandidate(key: string, sentAtMs: number): Record<string, unknown> {
  return {
    kind: 'ice',
    candidate: 'candidate:842163049 1 udp 1677729535 203.0.113.7 46154 typ srflx raddr 192.168.1.23 rport 46154 generation 0 ufrag EsAw network-cost 999',
    sdpMid: '0',
    sdpMLineIndex: 0,
    usernameFragment: 'EsAw',
    key,
    sentAtMs,
  };
}

/** The payload's size as JSON, with a key and a time of the sizes a run uses. */
export const PAYLOAD_BYTES = Buffer.byteLength(JSON.stringify(iceCandidate('abcdefs.0.123456', 1_764_000_000_000.123)));

interface Pair {
  caller: Device;
  callee: Device;
  callId: string;
}

export function createTask(): Task {
  let s: DeliverySetup;
  let http: JsonHttp | undefined;
  let pairs: Pair[] = [];
  /** Each pair's caller socket on A (same index). */
  let senders: (DeviceSocket | IoSocket)[] = [];
  const sockets: (DeviceSocket | IoSocket)[] = [];
  const waiting = new Map<string, { w: Waiter; at: number }>();
  let seq = 0;

  const arrived = (key: unknown, at: number) => typeof key === 'string' && waiting.get(key)?.w.fire(at);
  const refused = (key: string | undefined, why: string) => key !== undefined && waiting.get(key)?.w.fail(new BenchFailure(why));

  return {
    async setup(raw) {
      s = raw as DeliverySetup;
      const name = (side: string, i: number) => `${s.tag}-${side}${s.gen}-${i}`;
      const at = (i: number) => s.localAddresses[i % s.localAddresses.length]!;
      pairs = Array.from({ length: s.pairs }, (_, i) => ({
        caller: device(s.secret, name('da', i), `${name('da', i)}-phone`, 'Bench Caller'),
        callee: device(s.secret, name('db', i), `${name('db', i)}-phone`),
        callId: name('dcall', i),
      }));
      if (s.system === 'calling') {
        // Calls first (created by the caller, answered by the callee's device), then the sockets
        // from the log's head: the set-up's own events are not replayed into the measurement.
        http = new JsonHttp(s.aUrl, { connections: 32, timeoutMs: 10_000 });
        await mapLimit(pairs, 32, (p) => setUpCall(http!, p));
        const wsA = s.aUrl.replace(/^http/, 'ws');
        const wsB = s.bUrl.replace(/^http/, 'ws');
        senders = await mapLimit(pairs, 64, async (p, i) => {
          const a = await openDeviceSocket({ wsBase: wsA, token: p.caller.token, localAddress: at(2 * i), onReply: (r) => r.status >= 400 && refused(r.operationId, `message: ${r.status} ${r.body.code ?? ''}`) });
          const b = await openDeviceSocket({
            wsBase: wsB,
            token: p.callee.token,
            localAddress: at(2 * i + 1),
            onMessage: (ev, t) => arrived(ev.payload.key, t),
            onEvent: (ev, t) => ev.type === 'call.renamed' && arrived(ev.displayName, t),
          });
          sockets.push(a, b);
          return a;
        });
      } else {
        senders = await mapLimit(pairs, 64, async (p, i) => {
          const a = await openIo(s.aUrl, p.caller.token, at(2 * i));
          const b = await openIo(s.bUrl, p.callee.token, at(2 * i + 1));
          b.on('message', (m: { payload?: { key?: unknown } }) => arrived(m.payload?.key, nowMs()));
          sockets.push(a, b);
          return a;
        });
      }
      return { sockets: sockets.length };
    },

    async run(raw, progress) {
      const r = raw as DeliveryRun;
      if (r.kind === 'rename' && s.system !== 'calling') throw new Error('rename: the calling backend only');
      const hist = new HistogramSet();
      const errors: Record<string, number> = {};
      let done = 0;
      let started = 0;
      let lastDone = r.startAtMs;

      const deliver = async (from: number): Promise<void> => {
        const i = seq++;
        const p = pairs[i % pairs.length]!;
        const a = senders[i % pairs.length]!;
        const key = `${s.tag}.${s.gen}.${i}`;
        const w = new Waiter();
        waiting.set(key, { w, at: from });
        started++;
        try {
          if (r.kind === 'rename') {
            const res = await http!.post(`/v1/calls/${p.callId}/rename`, p.caller.token, { displayName: key, operationId: randomUUID() });
            if (res.status !== 200) throw new BenchFailure(`rename: HTTP ${res.status}`);
          } else if ('ws' in a) {
            a.ws.send(JSON.stringify({ type: 'message', callId: p.callId, operationId: key, payload: iceCandidate(key, from) }));
          } else {
            a.emit('message', { toUserId: p.callee.userId, payload: iceCandidate(key, from) }, (ack: { ok?: boolean }) => {
              if (!ack?.ok) refused(key, 'message: refused');
            });
          }
          const at = await w.wait();
          hist.get(DELIVERY).recordMs(at - from);
          done++;
          lastDone = Math.max(lastDone, at);
        } catch (err) {
          countInto(errors, err instanceof BenchFailure ? err.key : (err as Error).message.slice(0, 60));
        } finally {
          waiting.delete(key);
        }
      };
      await driveLoad(
        r,
        (limit) => {
          for (const { w, at } of waiting.values()) if (at < limit) w.fail(new BenchFailure(`timeout: not delivered within ${r.timeoutMs} ms`));
        },
        () => progress({ done, errors: Object.values(errors).reduce((a, b) => a + b, 0) }),
        deliver,
      );
      return { done, started, errors, hist: hist.serialize(), spanMs: lastDone - r.startAtMs } satisfies DeliveryResult;
    },

    async teardown() {
      for (const so of sockets) 'ws' in so ? so.close() : so.disconnect();
      await http?.close();
    },
  };
}

/** An accepted call between the pair: created by the caller, answered by the callee's device. */
async function setUpCall(http: JsonHttp, p: Pair): Promise<void> {
  const created = await http.post('/v1/calls', p.caller.token, { callId: p.callId, calleeUserId: p.callee.userId, operationId: randomUUID(), video: false });
  if (created.status !== 201) throw new Error(`set-up: create answered HTTP ${created.status}`);
  const answered = await http.post(`/v1/calls/${p.callId}/answer`, p.callee.token, { installationId: p.callee.installationId, operationId: randomUUID() });
  if (answered.status !== 200) throw new Error(`set-up: answer answered HTTP ${answered.status}`);
}

/** A Socket.IO client socket, websocket only, from `localAddress` (bench/socketio/server.ts). */
export function openIo(url: string, token: string, localAddress: string): Promise<IoSocket> {
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
    socket.once('connect', () => resolve(socket));
    socket.once('connect_error', (err) => reject(err));
  });
}
