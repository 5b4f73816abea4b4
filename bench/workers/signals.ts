import { randomUUID } from 'node:crypto';
import type { Socket as IoSocket } from 'socket.io-client';
import { nowMs } from '../lib/clock.js';
import { HistogramSet } from '../lib/histogram.js';
import { JsonHttp } from '../lib/http.js';
import { driveLoad } from '../lib/openLoop.js';
import { mapLimit, openDeviceSocket, type DeviceSocket } from '../lib/signaling.js';
import { device, type Device } from '../lib/users.js';
import { BenchFailure, countInto } from '../lib/waiter.js';
import { DELIVERY, openIo, type DeliveryResult } from './delivery.js';
import type { Task } from './task.js';

/**
 * The live-signal workload of the `compare` scenario (bench/README.md): rooms of `roomSize`
 * users, the sender's device with a socket on process A, every other member's on process B. The
 * sender sends a signal that must reach each other member's socket, across the two processes.
 *  - calling: each room is a group call, joined by every member (created by the sender, answered
 *    by each member over HTTP before measuring); a `signal` frame of kind `custom` (docs/signaling.md
 *    "Live signals": lua/sendSignals.lua, once for the signals A received in one turn, checks each
 *    sender is joined, counts the call's limit and publishes them together) → gateway B → `signal`
 *    frame.
 *  - socketio: each member's socket joins room `call:<id>`; `emit('signal', {room, value})` on A →
 *    `socket.to(room).emit()` through the Redis adapter → B → `signal` on each member's socket.
 * A signal counts as done once all roomSize − 1 copies arrived; each copy's latency is recorded.
 */

export interface SignalsSetup {
  system: 'calling' | 'socketio';
  aUrl: string;
  bUrl: string;
  secret: string;
  tag: string;
  gen: number;
  rooms: number;
  roomSize: number;
  localAddresses: string[];
}

export type SignalsRun = ({ mode: 'closed'; concurrency: number } | { mode: 'open'; rate: number }) & {
  durationMs: number;
  startAtMs: number;
  timeoutMs: number;
};

/** A run's figures: `done` signals with every copy delivered, `deliveries` copies that arrived. */
export type SignalsResult = DeliveryResult & { deliveries: number };

interface Room {
  callId: string;
  sender: Device;
  members: Device[];
}

/** A signal on its way: copies still to come, and when it was sent (or scheduled). */
interface InFlight {
  callId: string;
  left: number;
  at: number;
  done: () => void;
  fail: (why: string) => void;
}

export function createTask(): Task {
  let s: SignalsSetup;
  let http: JsonHttp | undefined;
  let rooms: Room[] = [];
  let senders: (DeviceSocket | IoSocket)[] = [];
  const sockets: (DeviceSocket | IoSocket)[] = [];
  const flying = new Map<string, InFlight>();
  let hist = new HistogramSet();
  let deliveries = 0;
  let seq = 0;

  const arrived = (value: unknown, at: number) => {
    const key = (value as { key?: unknown } | null)?.key;
    const f = typeof key === 'string' ? flying.get(key) : undefined;
    if (!f) return;
    deliveries++;
    hist.get(DELIVERY).recordMs(at - f.at);
    if (--f.left === 0) f.done();
  };

  return {
    async setup(raw) {
      s = raw as SignalsSetup;
      const name = (what: string, r: number, m = 0) => `${s.tag}-${what}${s.gen}-${r}-${m}`;
      const at = (i: number) => s.localAddresses[i % s.localAddresses.length]!;
      rooms = Array.from({ length: s.rooms }, (_, r) => {
        const sender = device(s.secret, name('ss', r), `${name('ss', r)}-phone`, 'Bench Sender');
        const members = Array.from({ length: s.roomSize - 1 }, (_, m) => device(s.secret, name('sm', r, m), `${name('sm', r, m)}-phone`));
        return { callId: name('scall', r), sender, members };
      });
      const wsA = s.aUrl.replace(/^http/, 'ws');
      const wsB = s.bUrl.replace(/^http/, 'ws');
      let n = 0;
      if (s.system === 'calling') {
        http = new JsonHttp(s.aUrl, { connections: 32, timeoutMs: 10_000 });
        await mapLimit(rooms, 8, (room) => joinedGroupCall(http!, room));
        senders = await mapLimit(rooms, 32, async (room) => {
          for (const m of room.members) {
            sockets.push(await openDeviceSocket({ wsBase: wsB, token: m.token, localAddress: at(n++), onSignal: (sig, t) => arrived(sig.value, t) }));
          }
          const a = await openDeviceSocket({ wsBase: wsA, token: room.sender.token, localAddress: at(n++), onError: (e) => failCall(e.detail?.callId, `signal: ${e.code} ${e.detail?.reason ?? ''}`) });
          sockets.push(a);
          return a;
        });
      } else {
        senders = await mapLimit(rooms, 32, async (room) => {
          for (const m of room.members) {
            const b = await openIo(s.bUrl, m.token, at(n++));
            b.on('signal', (msg: { value?: unknown }) => arrived(msg.value, nowMs()));
            await joinRoom(b, room.callId);
            sockets.push(b);
          }
          const a = await openIo(s.aUrl, room.sender.token, at(n++));
          await joinRoom(a, room.callId);
          sockets.push(a);
          return a;
        });
      }
      return { sockets: sockets.length };
    },

    async run(raw, progress) {
      const r = raw as SignalsRun;
      hist = new HistogramSet();
      deliveries = 0;
      const errors: Record<string, number> = {};
      let done = 0;
      let started = 0;
      let lastDone = r.startAtMs;

      const signal = async (from: number): Promise<void> => {
        const i = seq++;
        const room = rooms[i % rooms.length]!;
        const a = senders[i % rooms.length]!;
        const key = `${s.tag}.${s.gen}.${i}`;
        started++;
        try {
          await new Promise<void>((resolve, reject) => {
            flying.set(key, { callId: room.callId, left: s.roomSize - 1, at: from, done: resolve, fail: (why) => reject(new BenchFailure(why)) });
            const value = { key, sentAtMs: from };
            if ('ws' in a) a.ws.send(JSON.stringify({ type: 'signal', callId: room.callId, kind: 'custom', value }));
            else a.emit('signal', { room: room.callId, value });
          });
          done++;
          lastDone = Math.max(lastDone, nowMs());
        } catch (err) {
          countInto(errors, err instanceof BenchFailure ? err.key : (err as Error).message.slice(0, 60));
        } finally {
          flying.delete(key);
        }
      };
      await driveLoad(
        r,
        (limit) => {
          for (const f of flying.values()) if (f.at < limit) f.fail(`timeout: not every copy within ${r.timeoutMs} ms`);
        },
        () => progress({ done, errors: Object.values(errors).reduce((x, y) => x + y, 0) }),
        signal,
      );
      return { done, started, deliveries, errors, hist: hist.serialize(), spanMs: lastDone - r.startAtMs } satisfies SignalsResult;
    },

    async teardown() {
      for (const so of sockets) 'ws' in so ? so.close() : so.disconnect();
      await http?.close();
    },
  };

  /** A refused signal's `error` frame names its call, not the signal: every one in flight on that call fails. */
  function failCall(callId: unknown, why: string): void {
    for (const f of flying.values()) if (f.callId === callId) f.fail(why);
  }
}

/** A group call from the room's sender that every member joined (answered over HTTP). */
async function joinedGroupCall(http: JsonHttp, room: Room): Promise<void> {
  const created = await http.post('/v1/calls', room.sender.token, { callId: room.callId, calleeUserIds: room.members.map((m) => m.userId), operationId: randomUUID(), video: false });
  if (created.status !== 201) throw new Error(`set-up: group create answered HTTP ${created.status}`);
  for (const m of room.members) {
    const answered = await http.post(`/v1/calls/${room.callId}/answer`, m.token, { installationId: m.installationId, operationId: randomUUID() });
    if (answered.status !== 200) throw new Error(`set-up: answer answered HTTP ${answered.status}`);
  }
}

function joinRoom(socket: IoSocket, room: string): Promise<void> {
  return new Promise((resolve, reject) => {
    socket.emit('join', { room }, (ack: { ok?: boolean }) => (ack?.ok ? resolve() : reject(new Error('socket.io: join refused'))));
  });
}
