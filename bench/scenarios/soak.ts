import type { BenchContext } from '../lib/context.js';
import { mergeHists } from '../lib/context.js';
import { nowMs } from '../lib/clock.js';
import { GeneratorPool } from '../lib/generators.js';
import type { ListeningProcess } from '../lib/processes.js';
import { errorList, fmtMs, fmtNum, fmtRate, mdTable, type ScenarioResult } from '../lib/report.js';
import { SOAK_KINDS, type SoakResult, type SoakRun, type SoakSetup } from '../workers/soak.js';

/**
 * The soak (docs/keyspace.md says what each key's bound is): a fixed fraction of the sustained
 * rate for a long time, with calls that end every way, users who leave for good, and devices
 * that reconnect and resume by cursor (bench/workers/soak.ts). Once a minute it samples each
 * server process's RSS, V8 heap and event-loop delay p99 (from its own metrics listener), Redis's
 * used_memory and key count, and the minute's lifecycle p99 and errors. After the warm-up, the
 * least-squares slope of each series, in % of its mean per 10 minutes, tells whether anything
 * grows: a leak shows as a positive slope, and the report names the number that grew.
 */

/** Without a sustained rate from this run's lifecycle scenario or `--set soak.rate=`. */
const DEFAULT_RATE = 100;
/** A slope above this (% of the mean per 10 min) counts as growth. */
const GROWTH_PCT_PER_10MIN = 1;

interface ProcessSample {
  rssBytes: number;
  heapBytes: number;
  loopP99Ms: number;
}

/** Every retention of the soak's server (see the env below). */
const SOAK_RETENTION_MS = 60_000;

export interface SoakSample {
  /** When the sample was taken, in minutes since the soak began (one decimal). */
  minute: number;
  /** Since the soak began. */
  atMs: number;
  started: number;
  completed: number;
  errors: Record<string, number>;
  /** p99 of each kind of lifecycle over the minute (ms). */
  p99: Record<string, number>;
  processes: Record<string, ProcessSample>;
  redis: { usedMemory: number; keys: number };
}

export interface SoakSeries {
  name: string;
  unit: 'bytes' | 'ms' | 'keys';
  values: number[];
  /** Least-squares slope after the warm-up, in % of the series' mean per 10 minutes. */
  slopePctPer10Min: number;
  grew: boolean;
}

/** One process's figures from its Prometheus listener (names as src/observability/metrics.ts registers them). */
async function scrape(p: ListeningProcess): Promise<ProcessSample | undefined> {
  const port = Number(p.listening.metricsPort);
  if (!port) return undefined;
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const value = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm').exec(text)?.[1] ?? NaN);
  return {
    rssBytes: value('calling_process_resident_memory_bytes'),
    heapBytes: value('calling_nodejs_heap_size_used_bytes'),
    loopP99Ms: value('calling_nodejs_eventloop_lag_p99_seconds') * 1000,
  };
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
  const pool = await GeneratorPool.start(ctx.opts.generators, 'soak', (i) => ({ baseUrl: target.baseUrl, wsBase: target.wsBase, secret: ctx.secret, tag: `${ctx.tag}`, gen: i, pairs }) satisfies SoakSetup);
  const samples: SoakSample[] = [];
  const t0 = nowMs();
  try {
    const minutes = Math.max(1, Math.round(z.durationMs / z.sampleMs));
    for (let m = 1; m <= minutes; m++) {
      const first = m === 1;
      const outs = await pool.run<SoakResult>(() => ({ rate: rate / pool.size, durationMs: z.sampleMs, timeoutMs: z.ringTimeoutMs + 10_000, churn: first ? 0 : z.churn, reconnect: first ? 0 : z.reconnect }) satisfies SoakRun);
      const errors: Record<string, number> = {};
      for (const o of outs) for (const [k, v] of Object.entries(o.result.errors)) errors[k] = (errors[k] ?? 0) + v;
      const hist = mergeHists(outs.map((o) => o.result.hist));
      const atMs = nowMs() - t0;
      const sample: SoakSample = {
        minute: Number((atMs / 60_000).toFixed(1)),
        atMs,
        started: outs.reduce((a, o) => a + o.result.started, 0),
        completed: outs.reduce((a, o) => a + o.result.completed, 0),
        errors,
        p99: Object.fromEntries(Object.entries(hist).map(([k, h]) => [k, h.p99])),
        processes: {},
        redis: { usedMemory: (await ctx.redisInfo()).usedMemory, keys: await ctx.redisKeys() },
      };
      for (const [name, p] of processes) {
        const s = await scrape(p).catch(() => undefined);
        if (s) sample.processes[name] = s;
      }
      samples.push(sample);
      const mb = (b: number) => `${(b / 1048576).toFixed(1)} MB`;
      ctx.log(
        `  minute ${sample.minute}: ${fmtNum(sample.completed)}/${fmtNum(sample.started)} lifecycles, answered p99 ${fmtMs(sample.p99.answered ?? NaN)}, errors ${errorList(errors)}; ` +
          Object.entries(sample.processes).map(([n, s]) => `${n} RSS ${mb(s.rssBytes)} heap ${mb(s.heapBytes)}`).join(', ') +
          `; Redis ${mb(sample.redis.usedMemory)}, ${fmtNum(sample.redis.keys)} keys`,
      );
    }
  } finally {
    await pool.close();
  }
  return report(ctx, samples, rate, rateSource);
}

function report(ctx: BenchContext, samples: readonly SoakSample[], rate: number, rateSource: string): ScenarioResult {
  const z = ctx.opts.sizes.soak;
  const after = samples.filter((s) => s.atMs > z.warmupMs);
  const xs = after.map((s) => s.atMs / 60_000);
  const seriesOf = (name: string, unit: SoakSeries['unit'], pick: (s: SoakSample) => number | undefined): SoakSeries | undefined => {
    const values = samples.map((s) => pick(s) ?? NaN);
    if (values.every((v) => !Number.isFinite(v))) return undefined;
    const slope = slopePctPer10Min(xs, after.map((s) => pick(s) ?? NaN));
    return { name, unit, values, slopePctPer10Min: slope, grew: slope > GROWTH_PCT_PER_10MIN };
  };
  const names = [...new Set(samples.flatMap((s) => Object.keys(s.processes)))];
  const series = [
    ...names.flatMap((n) => [
      seriesOf(`${n} RSS`, 'bytes', (s) => s.processes[n]?.rssBytes),
      seriesOf(`${n} heap`, 'bytes', (s) => s.processes[n]?.heapBytes),
      seriesOf(`${n} event-loop delay p99`, 'ms', (s) => s.processes[n]?.loopP99Ms),
    ]),
    seriesOf('Redis used_memory', 'bytes', (s) => s.redis.usedMemory),
    seriesOf('Redis keys', 'keys', (s) => s.redis.keys),
    seriesOf('answered lifecycle p99', 'ms', (s) => s.p99.answered),
  ].filter((s): s is SoakSeries => s !== undefined);
  const errors: Record<string, number> = {};
  for (const s of samples) for (const [k, v] of Object.entries(s.errors)) errors[k] = (errors[k] ?? 0) + v;
  const grew = series.filter((s) => s.grew && s.unit !== 'ms');
  const window = Math.min(5, Math.max(1, Math.floor(samples.length / 3)));
  const p99Of = (list: readonly SoakSample[]) => Math.max(...list.map((s) => s.p99.answered ?? NaN));
  const firstP99 = p99Of(samples.slice(0, window));
  const lastP99 = p99Of(samples.slice(-window));
  const show = (v: number, unit: SoakSeries['unit']) => (unit === 'bytes' ? `${(v / 1048576).toFixed(1)} MB` : unit === 'ms' ? fmtMs(v) : fmtNum(v));

  const verdict = grew.length
    ? `Grew after the warm-up (slope above ${GROWTH_PCT_PER_10MIN} % per 10 min): ${grew.map((s) => `${s.name} (+${s.slopePctPer10Min.toFixed(1)} %)`).join(', ')}.`
    : `Nothing grew after the warm-up: every memory and key series' slope is at most ${GROWTH_PCT_PER_10MIN} % per 10 min.`;
  const md = [
    `${fmtRate(rate)} of full lifecycles (${rateSource}) for ${samples.length} min, cycling through every end: answered (with an in-call message and a rename, then hung up), declined, cancelled and unanswered (ring window ${z.ringTimeoutMs} ms). ` +
      `Before each minute after the first, ${Math.round(z.churn * 100)} % of the pairs of users leave for good (new users replace them) and ${Math.round(z.reconnect * 100)} % of the devices reconnect and resume from their cursor. ` +
      `The soak's server keeps everything one minute (CALL_RETENTION_MS, EVENT_LOG_MAX_AGE_MS, IDEMPOTENCY_TTL_MS, CALL_RECORD_RETENTION_DAYS and PUSH_REGISTRATION_IDLE_DAYS; a user's event-log meta lives seven times EVENT_LOG_MAX_AGE_MS), so every lifecycle's keys are gone within the warm-up (docs/keyspace.md). ` +
      `Slopes are least squares over the samples after the ${z.warmupMs / 60_000}-minute warm-up, in % of the mean per 10 minutes.`,
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
    mdTable(['series', 'first', 'last', 'slope after warm-up (% per 10 min)', 'grew'], series.map((s) => [s.name, show(s.values[0]!, s.unit), show(s.values.at(-1)!, s.unit), Number.isFinite(s.slopePctPer10Min) ? s.slopePctPer10Min.toFixed(2) : '–', s.grew ? 'yes' : 'no'])),
    '',
    verdict,
    '',
    `Answered lifecycle p99: ${fmtMs(firstP99)} in the first ${window} min, ${fmtMs(lastP99)} in the last ${window} (${(lastP99 / firstP99).toFixed(2)}×). Errors over the run: ${errorList(errors)}.`,
  ].join('\n');

  return {
    id: 'soak',
    title: 'Soak: memory, keys and latency over a long run',
    headlines: [
      { metric: `soak ${samples.length} min at ${fmtRate(rate)}: what grew`, value: grew.length ? grew.map((s) => `${s.name} +${s.slopePctPer10Min.toFixed(1)} %/10 min`).join('; ') : 'nothing', bound: verdict },
      { metric: 'soak answered p99, last vs first minutes', value: `${fmtMs(lastP99)} vs ${fmtMs(firstP99)} (${(lastP99 / firstP99).toFixed(2)}×)` },
      { metric: 'soak errors', value: errorList(errors) },
    ],
    goals: [
      {
        goal: `soak: 0 errors, server RSS and heap slopes < ${GROWTH_PCT_PER_10MIN} % per 10 min, last p99 within 1.2× of the first`,
        target: '30 min at half the sustained rate',
        measured: `${samples.length} min at ${fmtRate(rate)}; errors ${errorList(errors)}; ${verdict} p99 ${(lastP99 / firstP99).toFixed(2)}×`,
        status: Object.keys(errors).length === 0 && !series.some((s) => s.grew && / (RSS|heap)$/.test(s.name)) && lastP99 <= firstP99 * 1.2 ? 'MET' : 'MISSED',
        atGoalSize: samples.length >= 30,
        note: grew.length ? verdict : `quick runs are ${samples.length} min (--full: 30 min)`,
      },
    ],
    markdown: md,
    data: { rate, rateSource, warmupMs: z.warmupMs, samples, series },
  };
}
