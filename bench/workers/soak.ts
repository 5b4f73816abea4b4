import { randomUUID } from 'node:crypto';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import WebSocket from 'ws';
import { CallingClient, SignalingClient, type EventPayload } from '@calling-backend/client';
import type { CallsRun } from '../lib/callGenerator.js';
import { nowMs } from '../lib/clock.js';
import { HistogramSet, type SerializedHistogram } from '../lib/histogram.js';
import { openLoop } from '../lib/openLoop.js';
import { maxOf, Sampler } from '../lib/sampler.js';
import { device, type Device } from '../lib/users.js';
import { BenchFailure, countInto, Waiter, type LifecycleCounts } from '../lib/waiter.js';
import type { Task } from './task.js';
import type { CallsSetup } from './calls.js';

/**
 * The soak's load (bench/scenarios/soak.ts): pairs of users, each device on the client package's
 * own signaling client (which reconnects and resumes by cursor, as an app does), making calls
 * that end every way a call can, in turn:
 *   answered:   create → `call.invited` → answer → `call.accepted` → a message → a rename → hang-up → `call.ended`;
 *   declined:   create → `call.invited` → the callee declines → the caller's `call.ended`;
 *   cancelled:  create → the caller cancels at once → the callee's `call.ended`;
 *   unanswered: create → nobody answers → `call.ended` on both sides when the ring window ends.
 * Between runs (one a minute), some pairs leave for good and new users take their place, and
 * some devices reconnect and resume from their cursor.
 */

/** Where and as whom: as for the lifecycle's generators. */
export type SoakSetup = Pick<CallsSetup, 'baseUrl' | 'wsBase' | 'secret' | 'tag' | 'gen' | 'pairs'>;

/** At what rate, how long, and when a lifecycle is late: as for the lifecycle's generators. */
export interface SoakRun extends Pick<CallsRun, 'rate' | 'durationMs' | 'timeoutMs'> {
  /** Before the run: this share of the pairs leaves for good, replaced by new users. */
  churn: number;
  /** Before the run: this share of the remaining devices reconnects, resuming by cursor. */
  reconnect: number;
}

export interface SoakResult extends LifecycleCounts {
  /** Latency from the scheduled start to the lifecycle's last event, per kind of end. */
  hist: Record<string, SerializedHistogram>;
  ends: Record<string, number>;
  usersLeft: number;
  reconnected: number;
  generator: GeneratorHealth;
}

/**
 * The generator's own state over a run: it is part of the measurement (a late event loop delays
 * every event it times), so the soak reports it next to the server's.
 */
export interface GeneratorHealth {
  /**
   * V8 heap used after a full collection at the end of the run (between runs: no measured
   * lifecycle is paused by it): what the generator retains, exactly.
   */
  heapRetainedBytes: number;
  /** Highest RSS among the same readings. */
  rssBytes: number;
  /** Event-loop delay over the run (ms). */
  loopP99Ms: number;
  loopMaxMs: number;
  /** Time the garbage collector paused the generator over the run, in all and at worst (ms). */
  gcPauseMs: number;
  gcMaxPauseMs: number;
  /** Most timers pending at once among the readings. */
  timers: number;
  /** Event slots the devices still hold after the run (calls finished, so 0 unless they leak). */
  waiters: number;
}

/** How often the generator reads its own memory and timers during a run. */
const HEALTH_EVERY_MS = 5000;

interface HealthReading {
  rss: number;
  timers: number;
}

function retainedHeap(gcNow: () => void): number {
  gcNow();
  return process.memoryUsage().heapUsed;
}

/** Sums the garbage collector's pauses from start() to stop(). */
class GcPauses {
  totalMs = 0;
  maxMs = 0;
  private readonly observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      this.totalMs += e.duration;
      this.maxMs = Math.max(this.maxMs, e.duration);
    }
  });

  start(): this {
    this.observer.observe({ entryTypes: ['gc'] });
    return this;
  }

  stop(): void {
    this.observer.disconnect();
  }
}

/** A full garbage collection without starting the process with --expose-gc. */
function fullGc(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

function readHealth(): HealthReading {
  const { rss } = process.memoryUsage();
  return { rss, timers: process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length };
}

export const SOAK_KINDS = ['answered', 'declined', 'cancelled', 'unanswered'] as const;
type Kind = (typeof SOAK_KINDS)[number];

/**
 * How many recent events each device's signaling client remembers to drop repeats (the client
 * package's default is 1,000). An app holds one client; the soak holds thousands, each
 * remembering ~130 B per event (its eventId, and its call's id and revision; measured at three
 * events a call). At the default a device keeps every event of its life (~25 a minute at 456/s,
 * ~5 minutes on average with the churn and reconnects): the generator's heap grew with them for
 * the first ~15 minutes of a soak (a quick soak: 30,000 → 95,000 events remembered over 5
 * minutes at 200/s), and with it the work of its garbage collector, whose pauses show in every
 * latency it measures. A repeat comes within a call's few seconds and one call brings a device
 * at most 5 events: 32 covers several calls and is reached within the warm-up.
 */
const DEDUPE_WINDOW = 32;

/** One device: its HTTP client, its signaling client, and waiters for the events it expects. */
class Phone {
  readonly api: CallingClient;
  signaling: SignalingClient;
  private readonly waiters = new Map<string, Waiter>();

  constructor(
    readonly d: Device,
    private readonly wsBase: string,
    baseUrl: string,
  ) {
    this.api = new CallingClient({ baseUrl, token: d.token });
    this.signaling = this.connect(undefined);
  }

  private connect(cursor: string | undefined): SignalingClient {
    return new SignalingClient({
      url: this.wsBase,
      token: this.d.token,
      ...(cursor ? { cursor } : {}),
      WebSocket,
      maxBackoffMs: 1000,
      dedupeWindow: DEDUPE_WINDOW,
      onEvent: (event: EventPayload) => this.waiter(event.callId, event.type).fire(nowMs()),
    });
  }

  /** The slot for one event of one call (created by whichever comes first: the event or the wait). */
  waiter(callId: string, type: string): Waiter {
    const key = `${callId} ${type}`;
    let w = this.waiters.get(key);
    if (!w) this.waiters.set(key, (w = new Waiter()));
    return w;
  }

  get waiterCount(): number {
    return this.waiters.size;
  }

  /** Forgets a finished call's slots, so memory stays flat over a long run. */
  forget(callId: string): void {
    for (const key of this.waiters.keys()) if (key.startsWith(`${callId} `)) this.waiters.delete(key);
  }

  /** Drops the socket and opens a new one that resumes from the last cursor. */
  async reconnect(): Promise<void> {
    const cursor = this.signaling.cursor;
    this.signaling.stop();
    this.signaling = this.connect(cursor);
    await this.signaling.start();
  }

  stop(): void {
    this.signaling.stop();
  }
}

interface Pair {
  caller: Phone;
  callee: Phone;
}

export async function createTask(): Promise<Task> {
  let setup: SoakSetup;
  /**
   * The free pairs, first in first out: a pair rests as long as possible between two calls (the
   * server marks a callee busy until the relay has processed the previous call's end).
   */
  const pairs: Pair[] = [];
  const gcNow = fullGc();
  let made = 0;
  let kindSeq = 0;

  const newPair = async (): Promise<Pair> => {
    const n = made++;
    const id = `${setup.tag}g${setup.gen}p${n}`;
    const caller = new Phone(device(setup.secret, `soak-a-${id}`, `soak-a-${id}-phone`, `Caller ${n}`), setup.wsBase, setup.baseUrl);
    const callee = new Phone(device(setup.secret, `soak-b-${id}`, `soak-b-${id}-phone`), setup.wsBase, setup.baseUrl);
    await Promise.all([caller.signaling.start(), callee.signaling.start()]);
    return { caller, callee };
  };

  /** One lifecycle of `kind`; resolves with the time of its last event. */
  async function lifecycle(p: Pair, kind: Kind, timeoutMs: number): Promise<number> {
    const { caller, callee } = p;
    // The timer goes as soon as the wait ends: left to fire, each would hold its closure for the
    // whole timeout (13 s), tens of thousands at once at the soak's rate.
    const within = async <T>(what: string, promise: Promise<T>): Promise<T> => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new BenchFailure(`${kind}: timeout waiting for ${what}`)), timeoutMs);
      });
      try {
        return await Promise.race([promise, timeout]);
      } finally {
        clearTimeout(timer);
      }
    };
    const call = await caller.api.createCall({ calleeUserId: callee.d.userId, operationId: randomUUID() });
    const id = call.callId;
    try {
      if (kind === 'cancelled') {
        // The caller names its own side's reason (docs/protocol.md "End reasons"): `callerCancelled`
        // is the callee's, an echo the server accepts and ignores, so the call rang out instead.
        await caller.api.end(id, { reason: 'localHangup', operationId: randomUUID() });
        return await within('call.ended at the callee', callee.waiter(id, 'call.ended').wait());
      }
      if (kind === 'unanswered') {
        await within('call.ended at the caller', caller.waiter(id, 'call.ended').wait());
        return await within('call.ended at the callee', callee.waiter(id, 'call.ended').wait());
      }
      await within('call.invited', callee.waiter(id, 'call.invited').wait());
      if (kind === 'declined') {
        await callee.api.end(id, { reason: 'declined', operationId: randomUUID() });
        return await within('call.ended at the caller', caller.waiter(id, 'call.ended').wait());
      }
      await callee.api.answer(id, { installationId: callee.d.installationId, operationId: randomUUID() });
      await within('call.accepted', caller.waiter(id, 'call.accepted').wait());
      const sent = await fetch(`${setup.baseUrl}/v1/calls/${encodeURIComponent(id)}/messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${caller.d.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ operationId: randomUUID(), payload: { kind: 'offer', sdp: 'v=0' } }),
      });
      if (sent.status !== 200) throw new BenchFailure(`message: HTTP ${sent.status}`);
      await sent.arrayBuffer();
      await caller.api.rename(id, { displayName: 'Renamed', operationId: randomUUID() });
      await within('call.renamed', callee.waiter(id, 'call.renamed').wait());
      await caller.api.end(id, { reason: 'localHangup', operationId: randomUUID() });
      return await within('call.ended at the callee', callee.waiter(id, 'call.ended').wait());
    } finally {
      caller.forget(id);
      callee.forget(id);
    }
  }

  return {
    async setup(params) {
      setup = params as SoakSetup;
      for (let i = 0; i < setup.pairs; i++) pairs.push(await newPair());
      return { pairs: pairs.length };
    },

    async run(params, progress) {
      const r = params as SoakRun;
      const hist = new HistogramSet();
      const errors: Record<string, number> = {};
      const ends: Record<string, number> = {};
      // Users leave for good (their sockets close and never return) and new ones arrive.
      const leaving = Math.round(pairs.length * r.churn);
      for (let i = 0; i < leaving; i++) {
        const p = pairs.shift()!;
        p.caller.stop();
        p.callee.stop();
        pairs.push(await newPair());
      }
      // Devices drop their socket and resume from their cursor.
      const phones = pairs.flatMap((p) => [p.caller, p.callee]);
      const reconnecting = phones.filter(() => Math.random() < r.reconnect);
      await Promise.all(reconnecting.map((ph) => ph.reconnect()));

      const loop = monitorEventLoopDelay({ resolution: 10 });
      loop.enable();
      const health = new Sampler(HEALTH_EVERY_MS, readHealth);
      const gc = new GcPauses().start();
      const total = pairs.length;
      let started = 0;
      let completed = 0;
      let inflight = 0;
      const done: Promise<void>[] = [];
      const timer = setInterval(() => progress({ started, completed, errors: Object.values(errors).reduce((a, b) => a + b, 0), inflight }), 1000);
      // Starts are scheduled from now, after the users came and went and the devices reconnected.
      await openLoop(r.rate, r.durationMs, nowMs() + 100, (_seq, at) => {
        const pair = pairs.shift();
        if (!pair) return countInto(errors, `no free pair: all ${total} in calls (the server is too slow for this rate)`);
        const kind = SOAK_KINDS[kindSeq++ % SOAK_KINDS.length]!;
        started++;
        inflight++;
        done.push(
          lifecycle(pair, kind, r.timeoutMs)
            .then((lastAt) => {
              completed++;
              countInto(ends, kind);
              hist.get(kind).recordMs(lastAt - at);
            })
            .catch((err: unknown) => countInto(errors, err instanceof BenchFailure ? err.key : `${kind}: ${String((err as Error).message ?? err).slice(0, 80)}`))
            .finally(() => {
              inflight--;
              pairs.push(pair);
            }),
        );
      });
      await Promise.all(done);
      clearInterval(timer);
      loop.disable();
      gc.stop();
      const readings = await health.stop();
      const generator: GeneratorHealth = {
        heapRetainedBytes: retainedHeap(gcNow),
        rssBytes: maxOf(readings, (r) => r.rss),
        loopP99Ms: loop.percentile(99) / 1e6,
        loopMaxMs: loop.max / 1e6,
        gcPauseMs: gc.totalMs,
        gcMaxPauseMs: gc.maxMs,
        timers: maxOf(readings, (r) => r.timers),
        waiters: pairs.reduce((n, p) => n + p.caller.waiterCount + p.callee.waiterCount, 0),
      };
      return { started, completed, errors, hist: hist.serialize(), ends, usersLeft: leaving * 2, reconnected: reconnecting.length, generator } satisfies SoakResult;
    },

    async teardown() {
      for (const p of pairs) {
        p.caller.stop();
        p.callee.stop();
      }
    },
  };
}
