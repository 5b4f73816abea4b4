import { io as connectSio, type Socket } from 'socket.io-client';
import { nowMs, sleep } from '../lib/clock.js';
import type { Device } from '../lib/users.js';
import { noteStep, wayBackReport, watchStalls, type WayBack, type WayBackReport } from '../lib/wayBack.js';
import type { Task } from './task.js';

/**
 * A share of the Socket.IO storm's clients (bench/scenarios/reconnectSocketio.ts), in a generator
 * process of its own, as ours are (workers/stormDevices.ts): socket.io-client with its own backoff
 * (base 250 ms), and a load balancer's view (once A is dead, A's address leads to B).
 *
 * Runs, in order: `{ aDead: true }`; `{ awaitBack: { killedAt, deadlineMs } }` (each client of A
 * connected again: ms since the kill, and whether it was a recovery); `{ received: true }` (what
 * each client got, by userId).
 */

export interface SioStormSetup {
  aUrl: string;
  bUrl: string;
  devices: { d: Device; home: 'A' | 'B' }[];
}

export interface SioBack {
  onA: number;
  back: { ms: number; recovered: boolean }[];
  /** The steps of A's clients on their way back, and this process's longest stall meanwhile. */
  wayBack: WayBackReport;
}

interface Client {
  userId: string;
  home: 'A' | 'B';
  socket: Socket;
  got: string[];
  connects: { atMs: number; recovered: boolean }[];
  back: WayBack;
}

export function createTask(): Task {
  let setup: SioStormSetup;
  let aDead = false;
  let stalls: ReturnType<typeof watchStalls> | undefined;
  const clients: Client[] = [];
  return {
    async setup(params) {
      setup = params as SioStormSetup;
      for (const { d, home } of setup.devices) {
        const socket = connectSio(home === 'A' ? setup.aUrl : setup.bUrl, { transports: ['websocket'], auth: { token: d.token }, reconnectionDelay: 250, reconnectionDelayMax: 10_000, forceNew: true });
        const c: Client = { userId: d.userId, home, socket, got: [], connects: [], back: {} };
        socket.on('connect', () => {
          c.connects.push({ atMs: nowMs(), recovered: socket.recovered });
          if (aDead && home === 'A') noteStep(c.back, 'synced');
        });
        socket.on('disconnect', () => {
          if (!aDead || home !== 'A') return;
          noteStep(c.back, 'closed');
          (socket.io as unknown as { uri: string }).uri = setup.bUrl;
        });
        // The Manager's reconnect attempt and its transport's open (bench/lib/wayBack.ts).
        socket.io.on('reconnect_attempt', () => {
          if (aDead && home === 'A') noteStep(c.back, 'attempt');
        });
        socket.io.on('open', () => {
          if (aDead && home === 'A') noteStep(c.back, 'open');
        });
        socket.on('event', (e: { callId: string; seq: number }) => c.got.push(`${e.callId}/${e.seq}`));
        clients.push(c);
      }
      const deadline = nowMs() + 120_000;
      while (clients.some((c) => c.connects.length === 0) && nowMs() < deadline) await sleep(20);
      return { connected: clients.filter((c) => c.connects.length > 0).length };
    },
    async run(params) {
      const m = params as { aDead?: true; awaitBack?: { killedAt: number; deadlineMs: number }; received?: true };
      if (m.aDead) {
        aDead = true;
        stalls = watchStalls();
        return {};
      }
      if (m.awaitBack) {
        const { killedAt, deadlineMs } = m.awaitBack;
        const onA = clients.filter((c) => c.home === 'A');
        while (!onA.every((c) => c.connects.some((x) => x.atMs > killedAt)) && nowMs() < killedAt + deadlineMs) await sleep(20);
        const back = onA.map((c) => c.connects.find((x) => x.atMs > killedAt)).filter((x) => x !== undefined).map((x) => ({ ms: x.atMs - killedAt, recovered: x.recovered }));
        return { onA: onA.length, back, wayBack: wayBackReport(onA.map((c) => c.back), killedAt, stalls) } satisfies SioBack;
      }
      if (m.received) return Object.fromEntries(clients.map((c) => [c.userId, c.got]));
      throw new Error('sioStormDevices: unknown run');
    },
    async teardown() {
      for (const c of clients) c.socket.disconnect();
    },
  };
}
