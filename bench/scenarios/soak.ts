import type { BenchContext } from '../lib/context.js';
import { p99AtMostMs, promDelta, promHistogram, type PromHistogram } from '../lib/promMetrics.js';
import { invalidReasons } from '../lib/validity.js';
import { mergeHists } from '../lib/context.js';
import { randomUUID } from 'node:crypto';
import { TOKEN_CACHE_SIZE } from '../../src/auth/verifier.js';
import { nowMs } from '../lib/clock.js';
import { JsonHttp } from '../lib/http.js';
import { device } from '../lib/users.js';
import { GeneratorPool } from '../lib/generators.js';
import { settledMemory, type ListeningProcess } from '../lib/processes.js';
import { errorList, fmtMs, fmtNum, fmtRate, mdTable, type ScenarioResult } from '../lib/report.js';
import { Histogram, type SerializedHistogram } from '../lib/histogram.js';
import { maxOf, minOf, Sampler } from '../lib/sampler.js';
import type { LifecycleCounts } from '../lib/waiter.js';
import { SOAK_KINDS, type GeneratorHealth, type SoakResult, type SoakRun, type SoakSetup } from '../workers/soak.js';

/**
 * The soak (docs/keyspace.md says what each key's bound is): a fixed fraction of the sustained
 * rate for a long time, with calls that end every way, users who leave for good, and devices
 * that reconnect and resume by cursor (bench/workers/soak.ts). Every few seconds it reads each
 * server process's RSS, V8 heap and event-loop delay p99 (from its own metrics listener) and
 * Redis's used_memory; each minute keeps the lowest RSS and used_memory reading (the floor after
 * a garbage collection, which a leak raises; a single reading lands anywhere in the collector's
 * cycle), each process's heap after full collections once the minute's lifecycles have ended, the
 * highest loop delay, Redis's key count at the minute's end, the minute's lifecycle p99 and
 * errors, the servers' own HTTP and relay times, and the generator's own memory and loop delay
 * (it is part of the measurement). After the warm-up, the least-squares slope of each series, in
 * % of its mean per 10 minutes, tells whether anything grows: a leak shows as a positive slope,
 * and the report names the number that grew.
 */

/** Without a sustained rate from this run's lifecycle scenario or `--set soak.rate=`. */
const DEFAULT_RATE = 100;
/** A slope above this (% of the mean per 10 min) counts as growth. */
const GROWTH_PCT_PER_10MIN = 1;

/** How often, within each minute, the server processes and Redis are read. */
const READ_EVERY_MS = 5000;
/** The p99 comparison's windows: this many minutes (a third of the run after the warm-up when shorter). */
const P99_WINDOW_MIN = 5;

/** One minute of a server process: lowest RSS and heap, highest event-loop delay p99 among the readings. */
interface ProcessSample {
  rssBytes: number;
  heapBytes: number;
  loopP99Ms: number;
}

/** A prom-client histogram summed over its label sets: cumulative counts per upper bound (s). */
/** One read of a process's metrics listener. */
interface ProcessReading extends ProcessSample {
  /** The server's own HTTP request durations (api) and relay lag (worker), cumulative. */
  http: PromHistogram;
  relayLag: PromHistogram;
}

interface DeploymentReading {
  processes: Record<string, ProcessReading>;
  usedMemory: number;
}

/** Server-side time over a minute, from the servers' own histograms (coarse buckets: p99 is an upper bound). */
export interface ServerTimes {
  httpMeanMs: number;
  httpP99AtMostMs: number;
  relayLagMeanMs: number;
}

/** Every retention of the soak's server (see the env below). */
const SOAK_RETENTION_MS = 60_000;

/** The minute's lifecycles counted over the generators, and what was read of the processes. */
export interface SoakSample extends LifecycleCounts {
  /** When the sample was taken, in minutes since the soak began (one decimal). */
  minute: number;
  /** The minute's run began this long after the soak began (after the users came and went). */
  fromMs: number;
  /** Since the soak began. */
  atMs: number;
  /** p99 of each kind of lifecycle over the minute (ms). */
  p99: Record<string, number>;
  /** The answered lifecycles' latencies, for the p99 of several minutes together. */
  answeredHist: SerializedHistogram | undefined;
  processes: Record<string, ProcessSample>;
  server: ServerTimes;
  /** Summed over the generators (loop delay: the worst generator's). */
  generator: GeneratorHealth;
  /** used_memory: the minute's lowest reading; keys: at the minute's end. */
  redis: { usedMemory: number; keys: number };
}

export interface SoakSeries {
  name: string;
  unit: 'bytes' | 'ms' | 'keys';
  /** The deployment's (server, Redis) series are what the goal judges; the generator's explain the latency. */
  of: 'server' | 'redis' | 'generator' | 'latency';
  values: number[];
  /** Least-squares slope after the warm-up, in % of the series' mean per 10 minutes. */
  slopePctPer10Min: number;
  grew: boolean;
}

/**
 * One process's figures from its Prometheus listener (names as src/observability/metrics.ts
 * registers them). prom-client resets the loop-delay histogram at each scrape, so its p99 covers
 * the time since the previous read.
 */
async function scrape(p: ListeningProcess): Promise<ProcessReading | undefined> {
  const port = Number(p.listening.metricsPort);
  if (!port) return undefined;
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const value = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm').exec(text)?.[1] ?? NaN);
  return {
    rssBytes: value('calling_process_resident_memory_bytes'),
    heapBytes: value('calling_nodejs_heap_size_used_bytes'),
    loopP99Ms: value('calling_nodejs_eventloop_lag_p99_seconds') * 1000,
    http: promHistogram(text, 'calling_http_request_duration_seconds'),
    relayLag: promHistogram(text, 'calling_relay_lag_seconds'),
  };
}

function fmtAtMost(ms: number): string {
  return ms === Infinity ? 'above the largest bucket' : fmtMs(ms);
}

/** Every server process and Redis's memory, read once. */
async function readDeployment(ctx: BenchContext, processes: readonly [string, ListeningProcess][]): Promise<DeploymentReading> {
  const reading: DeploymentReading = { processes: {}, usedMemory: (await ctx.redisInfo()).usedMemory };
  for (const [name, p] of processes) {
    const r = await scrape(p).catch(() => undefined);
    if (r) reading.processes[name] = r;
  }
  return reading;
}

/** The servers' own HTTP and relay times between two minute-end readings, summed over the processes. */
function serverTimes(end: DeploymentReading, start: DeploymentReading | undefined): ServerTimes {
  const http: PromHistogram = { sumS: 0, count: 0, buckets: new Map() };
  let relaySumS = 0;
  let relayCount = 0;
  for (const [name, r] of Object.entries(end.processes)) {
    const d = promDelta(r.http, start?.processes[name]?.http);
    http.sumS += d.sumS;
    http.count += d.count;
    for (const [le, n] of d.buckets) http.buckets.set(le, (http.buckets.get(le) ?? 0) + n);
    const lag = promDelta(r.relayLag, start?.processes[name]?.relayLag);
    relaySumS += lag.sumS;
    relayCount += lag.count;
  }
  return { httpMeanMs: (http.sumS / http.count) * 1000, httpP99AtMostMs: p99AtMostMs(http), relayLagMeanMs: (relaySumS / relayCount) * 1000 };
}

/**
 * Each server process's V8 heap after full collections (lib/gcPreload.mjs), read when the minute's
 * lifecycles have all ended, so that no measured one waits for them: what the process retains.
 */
async function heapsAfterGc(processes: readonly [string, ListeningProcess][]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [name, p] of processes) out[name] = (await settledMemory(p.pid))?.heapUsed ?? NaN;
  return out;
}

/**
 * One minute of each process: the lowest RSS and the worst loop delay among its readings, and its
 * heap after full collections (the lowest reading when that could not be read).
 */
function processSamples(readings: readonly DeploymentReading[], heaps: Record<string, number>): Record<string, ProcessSample> {
  const names = [...new Set(readings.flatMap((r) => Object.keys(r.processes)))];
  return Object.fromEntries(
    names.map((n) => [
      n,
      {
        rssBytes: minOf(readings, (r) => r.processes[n]?.rssBytes),
        heapBytes: Number.isFinite(heaps[n]) ? heaps[n]! : minOf(readings, (r) => r.processes[n]?.heapBytes),
        loopP99Ms: maxOf(readings, (r) => r.processes[n]?.loopP99Ms),
      },
    ]),
  );
}

/** The generators' health over a minute: memory and timers summed, the worst loop delay. */
function generatorsHealth(list: readonly GeneratorHealth[]): GeneratorHealth {
  const sum = (pick: (g: GeneratorHealth) => number) => list.reduce((a, g) => a + pick(g), 0);
  return {
    heapRetainedBytes: sum((g) => g.heapRetainedBytes),
    rssBytes: sum((g) => g.rssBytes),
    loopP99Ms: Math.max(...list.map((g) => g.loopP99Ms)),
    loopMaxMs: Math.max(...list.map((g) => g.loopMaxMs)),
    gcPauseMs: Math.max(...list.map((g) => g.gcPauseMs)),
    gcMaxPauseMs: Math.max(...list.map((g) => g.gcMaxPauseMs)),
    timers: sum((g) => g.timers),
    waiters: sum((g) => g.waiters),
  };
}

/**
 * Fills the server's cache of verified tokens (src/auth/verifier.ts, bounded at TOKEN_CACHE_SIZE)
 * with tokens of users who never call: one authenticated GET of an unknown call each (404, no
 * write). A long-running deployment's cache is full; the soak's own devices (a few thousand, a few
 * hundred new a minute) would fill it only after about 20 minutes, and the api process's heap
 * would grow by ~510 B per token until then, which looks like a leak in a 30-minute soak.
 */
async function fillTokenCache(baseUrl: string, secret: string, tag: string): Promise<void> {
  const http = new JsonHttp(baseUrl, { connections: 8 });
  let next = 0;
  const one = async () => {
    for (let n = next++; n < TOKEN_CACHE_SIZE; n = next++) {
      const d = device(secret, `soak-fill-${tag}-${n}`, `soak-fill-${tag}-${n}-phone`);
      const r = await http.request('GET', `/v1/calls/${randomUUID()}`, d.token);
      if (r.status !== 404) throw new Error(`soak: filling the token cache: HTTP ${r.status} ${r.text.slice(0, 200)}`);
    }
  };
  try {
    await Promise.all(Array.from({ length: 8 }, one));
  } finally {
    await http.close();
  }
}

/** Least-squares slope of `ys` over `xs` (minutes), as % of the mean of `ys` per 10 minutes. */
export function slopePctPer10Min(xs: readonly number[], ys: readonly number[]): number {
  const n = xs.length;
  if (n < 2) return NaN;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  if (den === 0 || my === 0) return 0;
  return ((num / den) * 10 * 100) / my;
}

export async function soakScenario(ctx: BenchContext): Promise<ScenarioResult> {
  const z = ctx.opts.sizes.soak;
  const sustained = ctx.findings.sustainedLifecycleRate;
  const rate = Math.max(1, Math.round(z.rate > 0 ? z.rate : sustained ? sustained * z.fraction : DEFAULT_RATE));
  const rateSource = z.rate > 0 ? 'set with --set soak.rate' : sustained ? `${z.fraction} × the sustained rate of this run's lifecycle scenario (${fmtRate(sustained)})` : `a default (${DEFAULT_RATE}/s): no lifecycle scenario in this run`;

  // A deployment of its own: a short ring window (for the unanswered ends) and the shortest
  // retention the configuration allows, so that what has an end reaches it within the run.
  // Every retention at one minute (the shortest CALL_RETENTION_MS allows), so that the keys of a
  // lifecycle are gone well within the warm-up and Redis can show flat (docs/keyspace.md).
  const env = {
    RING_TIMEOUT_MS: String(z.ringTimeoutMs),
    CALL_RETENTION_MS: String(SOAK_RETENTION_MS),
    EVENT_LOG_MAX_AGE_MS: String(SOAK_RETENTION_MS),
    IDEMPOTENCY_TTL_MS: String(SOAK_RETENTION_MS),
    CALL_RECORD_RETENTION_DAYS: String(SOAK_RETENTION_MS / 86_400_000),
    PUSH_REGISTRATION_IDLE_DAYS: String(SOAK_RETENTION_MS / 86_400_000),
    REDIS_PREFIX: `soak${ctx.tag}`,
  };
  const { server, worker } = ctx.selfHosted ? await ctx.startDeployment('soak-server', env) : { server: undefined, worker: undefined };
  const processes: [string, ListeningProcess][] = server ? [[worker ? 'api+gateway' : 'server', server], ...(worker ? [['worker', worker] as [string, ListeningProcess]] : [])] : [];
  const target = server ? ctx.targetOf(server) : ctx.main;
  // Enough pairs for the calls in flight: an unanswered call holds its pair for the ring window.
  const pairs = Math.ceil((rate * (z.ringTimeoutMs / 1000 / SOAK_KINDS.length + 1) * 2) / ctx.opts.generators) + 20;
  ctx.log(`  ${fmtRate(rate)} (${rateSource}) for ${z.durationMs / 60_000} min, ${fmtNum(pairs * ctx.opts.generators)} pairs of users, ring window ${z.ringTimeoutMs} ms`);
  // A smoke run checks that the soak runs and counts; its memory figures mean nothing.
  if (ctx.opts.sizes.mode !== 'smoke') await fillTokenCache(target.baseUrl, ctx.secret, ctx.tag);
  const pool = await GeneratorPool.start(ctx.opts.generators, 'soak', (i) => ({ baseUrl: target.baseUrl, wsBase: target.wsBase, secret: ctx.secret, tag: `${ctx.tag}`, gen: i, pairs }) satisfies SoakSetup);
  const samples: SoakSample[] = [];
  const t0 = nowMs();
  const mb = (b: number) => `${(b / 1048576).toFixed(1)} MB`;
  try {
    const minutes = Math.max(1, Math.round(z.durationMs / z.sampleMs));
    let previousEnd: DeploymentReading | undefined;
    for (let m = 1; m <= minutes; m++) {
      const first = m === 1;
      const fromMs = nowMs() - t0;
      const reads = new Sampler(READ_EVERY_MS, () => readDeployment(ctx, processes));
      const outs = await pool.run<SoakResult>(() => ({ rate: rate / pool.size, durationMs: z.sampleMs, timeoutMs: z.ringTimeoutMs + 10_000, churn: first ? 0 : z.churn, reconnect: first ? 0 : z.reconnect }) satisfies SoakRun);
      // One more reading at the minute's end: the servers' histograms are counted between two of these.
      const end = await readDeployment(ctx, processes);
      const readings = [...(await reads.stop()), end];
      const heaps = await heapsAfterGc(processes);
      const errors: Record<string, number> = {};
      for (const o of outs) for (const [k, v] of Object.entries(o.result.errors)) errors[k] = (errors[k] ?? 0) + v;
      const hist = mergeHists(outs.map((o) => o.result.hist));
      const answered = new Histogram();
      for (const o of outs) if (o.result.hist.answered) answered.merge(o.result.hist.answered);
      const atMs = nowMs() - t0;
      const sample: SoakSample = {
        minute: Number((atMs / 60_000).toFixed(1)),
        fromMs,
        atMs,
        started: outs.reduce((a, o) => a + o.result.started, 0),
        completed: outs.reduce((a, o) => a + o.result.completed, 0),
        errors,
        p99: Object.fromEntries(Object.entries(hist).map(([k, h]) => [k, h.p99])),
        answeredHist: answered.count > 0 ? answered.serialize() : undefined,
        processes: processSamples(readings, heaps),
        server: serverTimes(end, previousEnd),
        generator: generatorsHealth(outs.map((o) => o.result.generator)),
        redis: { usedMemory: minOf(readings, (r) => r.usedMemory), keys: await ctx.redisKeys() },
      };
      previousEnd = end;
      samples.push(sample);
      const g = sample.generator;
      ctx.log(
        `  minute ${sample.minute}: ${fmtNum(sample.completed)}/${fmtNum(sample.started)} lifecycles, answered p99 ${fmtMs(sample.p99.answered ?? NaN)}, errors ${errorList(errors)}; ` +
          Object.entries(sample.processes).map(([n, s]) => `${n} RSS ${mb(s.rssBytes)} heap ${mb(s.heapBytes)}`).join(', ') +
          `; Redis ${mb(sample.redis.usedMemory)}, ${fmtNum(sample.redis.keys)} keys; server HTTP mean ${fmtMs(sample.server.httpMeanMs)}, relay lag mean ${fmtMs(sample.server.relayLagMeanMs)}` +
          `; generator heap ${mb(g.heapRetainedBytes)} RSS ${mb(g.rssBytes)} loop p99 ${fmtMs(g.loopP99Ms)} (max ${fmtMs(g.loopMaxMs)}), GC pauses ${fmtMs(g.gcPauseMs)} (max ${fmtMs(g.gcMaxPauseMs)}), ${fmtNum(g.timers)} timers, ${fmtNum(g.waiters)} waiters kept`,
      );
    }
  } finally {
    await pool.close();
  }
  return report(ctx, samples, rate, rateSource);
}

/** The samples whose minute began after the warm-up (a minute that began in it carries start-up costs). */
export function afterWarmup<T extends { fromMs: number }>(samples: readonly T[], warmupMs: number): T[] {
  return samples.filter((s) => s.fromMs >= warmupMs);
}

/**
 * The first and the last minutes after the warm-up whose answered p99 the goal compares: five
 * each (a third of them each in a run too short for that); undefined with fewer than two.
 */
export function p99Windows<T>(after: readonly T[]): { first: T[]; last: T[] } | undefined {
  if (after.length < 2) return undefined;
  const n = Math.min(P99_WINDOW_MIN, Math.max(1, Math.floor(after.length / 3)));
  return { first: after.slice(0, n), last: after.slice(-n) };
}

/** The answered p99 of several minutes together (their latencies merged, not the worst minute's). */
function answeredP99(list: readonly SoakSample[]): number {
  const h = new Histogram();
  for (const s of list) if (s.answeredHist) h.merge(s.answeredHist);
  return h.count > 0 ? h.summary().p99 : NaN;
}

/** "minutes 5.3–10.6": when a window's first minute began and its last ended. */
function windowName(list: readonly SoakSample[]): string {
  return `minutes ${(list[0]!.fromMs / 60_000).toFixed(1)}–${(list.at(-1)!.atMs / 60_000).toFixed(1)}`;
}

function report(ctx: BenchContext, samples: readonly SoakSample[], rate: number, rateSource: string): ScenarioResult {
  const z = ctx.opts.sizes.soak;
  const after = afterWarmup(samples, z.warmupMs);
  const xs = after.map((s) => s.atMs / 60_000);
  const seriesOf = (name: string, unit: SoakSeries['unit'], of: SoakSeries['of'], pick: (s: SoakSample) => number | undefined): SoakSeries | undefined => {
    const values = samples.map((s) => pick(s) ?? NaN);
    if (values.every((v) => !Number.isFinite(v))) return undefined;
    const slope = slopePctPer10Min(xs, after.map((s) => pick(s) ?? NaN));
    return { name, unit, of, values, slopePctPer10Min: slope, grew: slope > GROWTH_PCT_PER_10MIN };
  };
  const names = [...new Set(samples.flatMap((s) => Object.keys(s.processes)))];
  const series = [
    ...names.flatMap((n) => [
      seriesOf(`${n} RSS`, 'bytes', 'server', (s) => s.processes[n]?.rssBytes),
      seriesOf(`${n} heap`, 'bytes', 'server', (s) => s.processes[n]?.heapBytes),
      seriesOf(`${n} event-loop delay p99`, 'ms', 'server', (s) => s.processes[n]?.loopP99Ms),
    ]),
    seriesOf('Redis used_memory', 'bytes', 'redis', (s) => s.redis.usedMemory),
    seriesOf('Redis keys', 'keys', 'redis', (s) => s.redis.keys),
    seriesOf('answered lifecycle p99', 'ms', 'latency', (s) => s.p99.answered),
    seriesOf('server HTTP mean', 'ms', 'latency', (s) => s.server.httpMeanMs),
    seriesOf('generator heap', 'bytes', 'generator', (s) => s.generator?.heapRetainedBytes),
    seriesOf('generator event-loop delay p99', 'ms', 'generator', (s) => s.generator?.loopP99Ms),
    seriesOf('generator GC pauses', 'ms', 'generator', (s) => s.generator?.gcPauseMs),
  ].filter((s): s is SoakSeries => s !== undefined);
  const errors: Record<string, number> = {};
  for (const s of samples) for (const [k, v] of Object.entries(s.errors)) errors[k] = (errors[k] ?? 0) + v;
  const grew = series.filter((s) => s.grew && s.unit !== 'ms' && s.of !== 'generator');
  const generatorGrew = series.filter((s) => s.grew && s.of === 'generator');
  const windows = p99Windows(after);
  const firstP99 = windows ? answeredP99(windows.first) : NaN;
  const lastP99 = windows ? answeredP99(windows.last) : NaN;
  const p99Ratio = lastP99 / firstP99;
  const p99Line = windows
    ? `Answered lifecycle p99 after the warm-up: ${fmtMs(firstP99)} over the first ${windows.first.length} min (${windowName(windows.first)}), ${fmtMs(lastP99)} over the last ${windows.last.length} (${windowName(windows.last)}): ${p99Ratio.toFixed(2)}×.`
    : 'Answered lifecycle p99: too few minutes after the warm-up to compare a first and a last window.';
  const show = (v: number, unit: SoakSeries['unit']) => (unit === 'bytes' ? `${(v / 1048576).toFixed(1)} MB` : unit === 'ms' ? fmtMs(v) : fmtNum(v));

  const verdict = grew.length
    ? `Grew after the warm-up (slope above ${GROWTH_PCT_PER_10MIN} % per 10 min): ${grew.map((s) => `${s.name} (+${s.slopePctPer10Min.toFixed(1)} %)`).join(', ')}.`
    : `Nothing grew after the warm-up: every memory and key series' slope is at most ${GROWTH_PCT_PER_10MIN} % per 10 min.`;
  const serverMemoryGrew = series.some((s) => s.grew && s.of === 'server' && s.unit === 'bytes');
  const md = [
    `${fmtRate(rate)} of full lifecycles (${rateSource}) for ${samples.length} min, cycling through every end: answered (with an in-call message and a rename, then hung up), declined, cancelled and unanswered (ring window ${z.ringTimeoutMs} ms). ` +
      `Before each minute after the first, ${Math.round(z.churn * 100)} % of the pairs of users leave for good (new users replace them) and ${Math.round(z.reconnect * 100)} % of the devices reconnect and resume from their cursor. ` +
      `The soak's server keeps everything one minute (CALL_RETENTION_MS, EVENT_LOG_MAX_AGE_MS, IDEMPOTENCY_TTL_MS, CALL_RECORD_RETENTION_DAYS and PUSH_REGISTRATION_IDLE_DAYS; a user's event-log meta lives seven times EVENT_LOG_MAX_AGE_MS), so every lifecycle's keys are gone within the warm-up (docs/keyspace.md). ` +
      `Each server process and Redis are read every ${READ_EVERY_MS / 1000} s; a minute's RSS and used_memory are its lowest reading (the floor after a garbage collection, which retained memory raises; one reading lands anywhere in the collector's cycle), its heap is read after full collections once the minute's lifecycles have ended (none waits for them), its loop p99 the highest of the ${READ_EVERY_MS / 1000}-second windows (prom-client resets it at each read), Redis keys are read at the minute's end. ` +
      `The generator reads its heap after a full collection at the end of each minute (between runs, so no measured lifecycle waits for it), its RSS (highest) every few seconds and its event-loop delay over the minute. ` +
      `Slopes are least squares over the minutes that began after the ${z.warmupMs / 60_000}-minute warm-up, in % of the mean per 10 minutes.`,
    '',
    mdTable(
      ['minute', 'lifecycles', 'answered p99', 'errors', ...names.flatMap((n) => [`${n} RSS`, `${n} heap`, `${n} loop p99`]), 'Redis memory', 'Redis keys'],
      samples.map((s) => [
        String(s.minute),
        `${fmtNum(s.completed)}/${fmtNum(s.started)}`,
        fmtMs(s.p99.answered ?? NaN),
        errorList(s.errors),
        ...names.flatMap((n) => [show(s.processes[n]?.rssBytes ?? NaN, 'bytes'), show(s.processes[n]?.heapBytes ?? NaN, 'bytes'), fmtMs(s.processes[n]?.loopP99Ms ?? NaN)]),
        show(s.redis.usedMemory, 'bytes'),
        fmtNum(s.redis.keys),
      ]),
    ),
    '',
    'Where a lifecycle\'s time goes, per minute: the servers\' own HTTP request time (all routes; p99 from their histogram\'s coarse buckets, so an upper bound) and relay lag (call change to its events appended), against the generator that measures the lifecycles: its heap, RSS, event-loop delay, garbage-collection pauses (the minute\'s total and the longest), pending timers and the event slots its devices still hold after the minute\'s calls ended.',
    '',
    mdTable(
      ['minute', 'answered p99', 'server HTTP mean', 'server HTTP p99 ≤', 'relay lag mean', 'generator heap after a full GC', 'generator RSS', 'generator loop p99', 'generator loop max', 'generator GC pauses', 'generator longest GC pause', 'generator timers', 'generator waiters kept'],
      samples.map((s) => [
        String(s.minute),
        fmtMs(s.p99.answered ?? NaN),
        fmtMs(s.server.httpMeanMs),
        fmtAtMost(s.server.httpP99AtMostMs),
        fmtMs(s.server.relayLagMeanMs),
        show(s.generator.heapRetainedBytes, 'bytes'),
        show(s.generator.rssBytes, 'bytes'),
        fmtMs(s.generator.loopP99Ms),
        fmtMs(s.generator.loopMaxMs),
        fmtMs(s.generator.gcPauseMs),
        fmtMs(s.generator.gcMaxPauseMs),
        fmtNum(s.generator.timers),
        fmtNum(s.generator.waiters),
      ]),
    ),
    '',
    mdTable(['series', 'first', 'last', 'slope after warm-up (% per 10 min)', 'grew'], series.map((s) => [s.name, show(s.values[0]!, s.unit), show(s.values.at(-1)!, s.unit), Number.isFinite(s.slopePctPer10Min) ? s.slopePctPer10Min.toFixed(2) : '–', s.grew ? 'yes' : 'no'])),
    '',
    verdict,
    ...(generatorGrew.length ? ['', `The load generator's own ${generatorGrew.map((s) => `${s.name.replace('generator ', '')} (+${s.slopePctPer10Min.toFixed(1)} %)`).join(', ')} grew: its latencies include that.`] : []),
    '',
    `${p99Line} Errors over the run: ${errorList(errors)}.`,
  ].join('\n');

  const invalid = invalidReasons({
    errors: [{ where: 'the soak', errors }],
    nonZero: [{ what: 'soak lifecycles completed', n: samples.reduce((a, s) => a + s.completed, 0) }, { what: 'soak samples', n: samples.length }],
  });
  return {
    invalid,
    id: 'soak',
    title: 'Soak: memory, keys and latency over a long run',
    headlines: [
      { metric: `soak ${samples.length} min at ${fmtRate(rate)}: what grew`, value: grew.length ? grew.map((s) => `${s.name} +${s.slopePctPer10Min.toFixed(1)} %/10 min`).join('; ') : 'nothing', bound: verdict },
      { metric: 'soak answered p99, last vs first minutes after the warm-up', value: windows ? `${fmtMs(lastP99)} (${windowName(windows.last)}) vs ${fmtMs(firstP99)} (${windowName(windows.first)}): ${p99Ratio.toFixed(2)}×` : '–' },
      { metric: 'soak errors', value: errorList(errors) },
    ],
    goals: [
      {
        goal: `soak: 0 errors, server RSS and heap slopes < ${GROWTH_PCT_PER_10MIN} % per 10 min, p99 of the last ${P99_WINDOW_MIN} min after the warm-up within 1.2× of the first ${P99_WINDOW_MIN}`,
        target: '30 min at half the sustained rate',
        measured: `${samples.length} min at ${fmtRate(rate)}; errors ${errorList(errors)}; ${verdict} p99 ${windows ? `${p99Ratio.toFixed(2)}×` : '–'}`,
        status: Object.keys(errors).length === 0 && !serverMemoryGrew && windows !== undefined && lastP99 <= firstP99 * 1.2 ? 'MET' : 'MISSED',
        atGoalSize: samples.length >= 30,
        note: grew.length ? verdict : `quick runs are ${samples.length} min (--full: 30 min)`,
      },
    ],
    markdown: md,
    data: { rate, rateSource, warmupMs: z.warmupMs, samples, series },
  };
}
