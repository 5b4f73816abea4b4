import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { nowMs } from './clock.js';
import { Histogram } from './histogram.js';

/**
 * Each device's way back after a reconnect storm's kill (bench/scenarios/reconnect.ts), step by
 * step, so the report can say where the time goes: when the device saw its socket close, when it
 * made its first attempt to reconnect (after its backoff), when that socket opened, and when it
 * was synced (ours) or connected (Socket.IO). Both systems' device processes record the same
 * steps, and how long their own event loop stalled meanwhile: a stalled device process delays
 * every step after it, whatever the server does.
 */

export const WAY_BACK_STEPS = ['closed', 'attempt', 'open', 'synced'] as const;
export type WayBackStep = (typeof WAY_BACK_STEPS)[number];

/** One device's steps: epoch ms of the first of each after the kill. */
export type WayBack = Partial<Record<WayBackStep, number>>;

/**
 * What a device process reports: each step's ms since the kill, over its devices; each device's
 * ms from its socket's open to synced (the server's part of the way back: upgrade, token, resume,
 * replay); the process's longest stall.
 */
export interface WayBackReport {
  steps: Record<WayBackStep, number[]>;
  openToSynced: number[];
  stallMaxMs: number;
}

/** Notes a step for a device, once: only its first time after the kill counts. */
export function noteStep(back: WayBack, step: WayBackStep): void {
  back[step] ??= nowMs();
}

/** Watches this process's event loop from the kill on (10 ms resolution). */
export function watchStalls(): IntervalHistogram {
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  return h;
}

export function wayBackReport(backs: readonly WayBack[], killedAt: number, stalls: IntervalHistogram | undefined): WayBackReport {
  stalls?.disable();
  const steps = Object.fromEntries(WAY_BACK_STEPS.map((s) => [s, backs.flatMap((b) => (b[s] === undefined ? [] : [b[s] - killedAt]))])) as Record<WayBackStep, number[]>;
  const openToSynced = backs.flatMap((b) => (b.open === undefined || b.synced === undefined ? [] : [b.synced - b.open]));
  return { steps, openToSynced, stallMaxMs: stalls ? stalls.max / 1e6 : NaN };
}

export interface Quantiles {
  p50: number;
  p99: number;
  n: number;
}

/** The device processes' reports together: each step's p50 and p99, open to synced's, and the longest stall. */
export function mergeWayBack(reports: readonly WayBackReport[]): { steps: Record<WayBackStep, Quantiles>; openToSynced: Quantiles; stallMaxMs: number } {
  const quantiles = (xs: number[]): Quantiles => {
    const h = new Histogram();
    for (const ms of xs) h.recordMs(ms);
    const s = h.summary();
    return s.count ? { p50: s.p50, p99: s.p99, n: s.count } : { p50: NaN, p99: NaN, n: 0 };
  };
  const steps = Object.fromEntries(WAY_BACK_STEPS.map((s) => [s, quantiles(reports.flatMap((r) => r.steps[s]))])) as Record<WayBackStep, Quantiles>;
  return { steps, openToSynced: quantiles(reports.flatMap((r) => r.openToSynced)), stallMaxMs: Math.max(...reports.map((r) => r.stallMaxMs)) };
}
