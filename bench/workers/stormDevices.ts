import WebSocket from 'ws';
import { SignalingClient, type EventPayload, type SignalingOptions } from '@calling-backend/client';
import { nowMs, sleep } from '../lib/clock.js';
import type { Device } from '../lib/users.js';
import { noteStep, wayBackReport, watchStalls, type WayBack, type WayBackReport } from '../lib/wayBack.js';
import type { Task } from './task.js';

/**
 * A share of the reconnect storm's devices (bench/scenarios/reconnect.ts), in a generator process
 * of its own: thousands of devices coming back at once saturate the process that holds them, and
 * in one process the resync times measured that process. Each device is the client package with
 * its backoff and jitter; its WebSocket class plays the load balancer, sending A's address to B
 * once A is dead.
 *
 * Runs, in order: `{ aDead: true }` (before the kill: from now on A's address leads to B);
 * `{ awaitResync: { killedAt, deadlineMs } }` (until each device of A synced again: their times
 * since the kill); `{ check: { apiUrl } }` (each device's events against its log).
 */

export interface StormDevicesSetup {
  aUrl: string;
  bUrl: string;
  aPort: number;
  bPort: number;
  devices: { d: Device; home: 'A' | 'B' }[];
}

export interface StormResync {
  /** For each device of A here, ms from the kill until its first `synced` after it (sorted). */
  resyncedMs: number[];
  onA: number;
  /** The steps of A's devices on their way back, and this process's longest stall meanwhile. */
  wayBack: WayBackReport;
}

export interface StormCheck {
  lost: number;
  extra: number;
  outOfOrder: number;
  gaps: number;
  handed: number;
  repeats: number;
  errors: Record<string, number>;
}

interface Party {
  d: Device;
  home: 'A' | 'B';
  client: SignalingClient;
  startCursor?: string;
  events: EventPayload[];
  gaps: string[];
  synced: number[];
  rawEvents: number;
  back: WayBack;
}

export function createTask(): Task {
  let setup: StormDevicesSetup;
  let aDead = false;
  let stalls: ReturnType<typeof watchStalls> | undefined;
  const parties: Party[] = [];

  const makeParty = (d: Device, home: 'A' | 'B'): Party => {
    const p = { d, home, events: [], gaps: [], synced: [], rawEvents: 0, back: {} } as unknown as Party;
    const Balanced = class extends WebSocket {
      constructor(url: string, protocols?: string | string[], options?: WebSocket.ClientOptions) {
        super(aDead ? url.replace(`:${setup.aPort}/`, `:${setup.bPort}/`) : url, protocols, options);
        // A's devices on their way back (bench/lib/wayBack.ts): a socket made after the kill is
        // an attempt to reconnect.
        if (aDead && home === 'A') {
          noteStep(p.back, 'attempt');
          this.on('open', () => noteStep(p.back, 'open'));
        }
        this.on('close', () => {
          if (aDead && home === 'A') noteStep(p.back, 'closed');
        });
        this.on('message', (data: Buffer, isBinary: boolean) => {
          if (!isBinary && data.toString('utf8', 0, 15) === '{"type":"event"') p.rawEvents++;
        });
      }
    } as unknown as NonNullable<SignalingOptions['WebSocket']>;
    p.client = new SignalingClient({
      url: home === 'A' ? setup.aUrl : setup.bUrl,
      token: d.token,
      WebSocket: Balanced,
      onEvent: (e) => p.events.push(e),
      onGap: (reason) => p.gaps.push(reason),
      onSynced: (cursor) => {
        p.startCursor ??= cursor;
        p.synced.push(nowMs());
        if (aDead && home === 'A') noteStep(p.back, 'synced');
      },
      onError: () => {},
      startTimeoutMs: 120_000,
    });
    return p;
  };

  /** Each device's events against its log, from its first `synced` on (GET /v1/call-events). */
  const check = async (apiUrl: string): Promise<StormCheck> => {
    const out: StormCheck = { lost: 0, extra: 0, outOfOrder: 0, gaps: 0, handed: 0, repeats: 0, errors: {} };
    const readLog = async (p: Party) => {
      const ids: string[] = [];
      let cursor = p.startCursor!;
      for (;;) {
        const res = await fetch(`${apiUrl}/v1/call-events?cursor=${encodeURIComponent(cursor)}&limit=500`, { headers: { authorization: `Bearer ${p.d.token}` } });
        const page = (await res.json()) as { events: { eventId: string }[]; nextCursor: string; hasMore: boolean; gap?: unknown };
        if (page.gap) out.errors['gap in a log'] = (out.errors['gap in a log'] ?? 0) + 1;
        ids.push(...page.events.map((e) => e.eventId));
        cursor = page.nextCursor;
        if (!page.hasMore) return ids;
      }
    };
    for (let i = 0; i < parties.length; i += 50) {
      await Promise.all(
        parties.slice(i, i + 50).map(async (p) => {
          const log = await readLog(p);
          const got = new Set(p.events.map((e) => e.eventId));
          const logged = new Set(log);
          out.lost += log.filter((id) => !got.has(id)).length;
          out.extra += p.events.filter((e) => !logged.has(e.eventId)).length;
          const last = new Map<string, number>();
          for (const e of p.events) {
            if (Number(e.revision) <= (last.get(e.callId) ?? 0)) out.outOfOrder++;
            last.set(e.callId, Number(e.revision));
          }
        }),
      );
    }
    out.gaps = parties.reduce((n, p) => n + p.gaps.length, 0);
    out.handed = parties.reduce((n, p) => n + p.events.length, 0);
    out.repeats = parties.reduce((n, p) => n + p.rawEvents, 0) - out.handed;
    return out;
  };

  return {
    async setup(params) {
      setup = params as StormDevicesSetup;
      for (const { d, home } of setup.devices) parties.push(makeParty(d, home));
      for (let i = 0; i < parties.length; i += 200) await Promise.all(parties.slice(i, i + 200).map((p) => p.client.start()));
      return { synced: parties.length, onA: parties.filter((p) => p.home === 'A').length };
    },
    async run(params) {
      const m = params as { aDead?: true; awaitResync?: { killedAt: number; deadlineMs: number }; check?: { apiUrl: string } };
      if (m.aDead) {
        aDead = true;
        stalls = watchStalls();
        return {};
      }
      if (m.awaitResync) {
        const { killedAt, deadlineMs } = m.awaitResync;
        const onA = parties.filter((p) => p.home === 'A');
        while (!onA.every((p) => p.synced.some((t) => t > killedAt)) && nowMs() < killedAt + deadlineMs) await sleep(20);
        const resyncedMs = onA.map((p) => p.synced.find((t) => t > killedAt)).filter((t): t is number => t !== undefined).map((t) => t - killedAt).sort((a, b) => a - b);
        return { resyncedMs, onA: onA.length, wayBack: wayBackReport(onA.map((p) => p.back), killedAt, stalls) } satisfies StormResync;
      }
      if (m.check) return check(m.check.apiUrl);
      throw new Error('stormDevices: unknown run');
    },
    async teardown() {
      for (const p of parties) p.client.stop();
    },
  };
}
