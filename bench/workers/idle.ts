import WebSocket from 'ws';
import { sleep } from '../lib/clock.js';
import { mapLimit, openDeviceSocket } from '../lib/signaling.js';
import { device } from '../lib/users.js';
import { countInto } from '../lib/waiter.js';
import type { Task } from './task.js';

/**
 * Idle connections: opens `count` sockets spread over the target gateways and over several
 * loopback source addresses (one address has ~28k ephemeral ports), each an authenticated
 * signaling socket of its own user (`signaling`), or a bare WebSocket to the raw uWS app
 * (`raw`), then holds them.
 */

export interface IdleSetup {
  mode: 'signaling' | 'raw';
  /** ws:// bases; socket i goes to targets[i % targets.length]. */
  targets: string[];
  secret: string;
  tag: string;
  gen: number;
  count: number;
  localAddresses: string[];
}

/** `connect` opens the next `count` sockets (all that are left when omitted). */
export type IdleRun =
  | { op: 'connect'; concurrency: number; count?: number }
  | { op: 'hold'; ms: number }
  | { op: 'close' }
  /** Opens `count` sockets of other users and closes them again (warms the server's connection path). */
  | { op: 'warm'; count: number; concurrency: number };

export function createTask(): Task {
  let s: IdleSetup;
  let tokens: string[] = [];
  const sockets: WebSocket[] = [];
  let closedEarly = 0;
  let nextIndex = 0;
  let closeCodes: Record<string, number> = {};

  return {
    async setup(raw) {
      s = raw as IdleSetup;
      if (s.mode === 'signaling') {
        tokens = Array.from({ length: s.count }, (_, i) => device(s.secret, `${s.tag}-idle-g${s.gen}-u${i}`, `${s.tag}-idle-g${s.gen}-u${i}-phone`).token);
      }
      return {};
    },

    async run(raw) {
      const r = raw as IdleRun;
      if (r.op === 'connect') {
        const errors: Record<string, number> = {};
        const perTarget = s.targets.map(() => 0);
        const t0 = performance.now();
        const from = nextIndex;
        const to = Math.min(s.count, from + (r.count ?? s.count));
        nextIndex = to;
        const onClose = (code: number) => {
          closedEarly++;
          countInto(closeCodes, String(code));
        };
        const before = sockets.length;
        await mapLimit(
          Array.from({ length: to - from }, (_, i) => from + i),
          r.concurrency,
          async (i) => {
            const t = i % s.targets.length;
            const localAddress = s.localAddresses[i % s.localAddresses.length]!;
            try {
              const ws = s.mode === 'signaling'
                ? (await openDeviceSocket({ wsBase: s.targets[t]!, token: tokens[i]!, localAddress, onClose })).ws
                : await openRaw(`${s.targets[t]}/ws`, localAddress, onClose);
              sockets.push(ws);
              perTarget[t]!++;
            } catch (err) {
              countInto(errors, (err as Error).message.slice(0, 80));
            }
          },
        );
        if (nextIndex >= s.count) tokens = [];
        return { opened: sockets.length - before, perTarget, errors, ms: performance.now() - t0 };
      }
      if (r.op === 'warm') {
        const warm: WebSocket[] = [];
        await mapLimit(
          Array.from({ length: r.count }, (_, i) => i),
          r.concurrency,
          async (i) => {
            const localAddress = s.localAddresses[i % s.localAddresses.length]!;
            const t = s.targets[i % s.targets.length]!;
            try {
              warm.push(
                s.mode === 'signaling'
                  ? (await openDeviceSocket({ wsBase: t, token: device(s.secret, `${s.tag}-warm-g${s.gen}-u${i}`, `${s.tag}-warm-g${s.gen}-u${i}-phone`).token, localAddress })).ws
                  : await openRaw(`${t}/ws`, localAddress, () => {}),
              );
            } catch {
              /* a warm-up socket that fails does not matter */
            }
          },
        );
        await sleep(200);
        for (const w of warm) w.terminate();
        return { warmed: warm.length };
      }
      if (r.op === 'hold') {
        closedEarly = 0;
        closeCodes = {};
        await sleep(r.ms);
        return { open: sockets.filter((w) => w.readyState === WebSocket.OPEN).length, closedDuringHold: closedEarly, closeCodes };
      }
      for (const w of sockets) w.terminate();
      sockets.length = 0;
      return {};
    },

    async teardown() {
      for (const w of sockets) w.terminate();
    },
  };
}

function openRaw(url: string, localAddress: string, onClose: (code: number) => void): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false, localAddress });
    let open = false;
    ws.once('open', () => {
      open = true;
      resolve(ws);
    });
    ws.on('error', (err) => {
      if (!open) reject(err);
    });
    ws.on('close', (code) => {
      if (open) onClose(code);
      else reject(new Error(`closed before open (${code})`));
    });
  });
}
