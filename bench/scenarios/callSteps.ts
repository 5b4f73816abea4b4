import { cpus } from 'node:os';
import type { RateSearch } from '../lib/args.js';
import type { BenchContext, CpuShares } from '../lib/context.js';
import { mergeHists } from '../lib/context.js';
import { GeneratorPool, generatorCpu } from '../lib/generators.js';
import type { HistogramSummary } from '../lib/histogram.js';
import { nowMs } from '../lib/clock.js';
import { fmtNum, fmtPct } from '../lib/report.js';
import { PUSH_HOP, type CallCounts, type CallsResult } from '../lib/callGenerator.js';
import { p99AtMostMs, promDelta, scrapeHistogram } from '../lib/promMetrics.js';

const RELAY_LAG = 'calling_relay_lag_seconds';
const PUSH_REQUEST = 'calling_push_request_duration_seconds';
import type { CallsSetup } from '../workers/calls.js';
import { countInto } from '../lib/waiter.js';

/** Starts the generators of call lifecycles and points the fake push providers at them. */
export async function startCallsPool(ctx: BenchContext, pairsPerGenerator: number, devices: number, over: 'http' | 'socket' = 'http'): Promise<GeneratorPool> {
  const pool = await GeneratorPool.start(ctx.opts.generators, 'calls', (i) => setupFor(ctx, i, pairsPerGenerator, devices, over));
  const infos = pool.setupInfo as { udpPort: number; route: string }[];
  await ctx.routePush(Object.fromEntries(infos.filter((i) => i.udpPort).map((i) => [i.route, i.udpPort])));
  return pool;
}

export function setupFor(ctx: BenchContext, gen: number, pairs: number, devices: number, over: 'http' | 'socket' = 'http'): CallsSetup {
  return {
    baseUrl: ctx.main.baseUrl,
    wsBase: ctx.main.wsBase,
    secret: ctx.secret,
    // Each mode its own users: a socket-mode run right after an HTTP one starts with idle callees.
    tag: `${ctx.tag}${devices > 1 ? 's' : 'l'}${over === 'socket' ? 'w' : ''}`,
    gen,
    pairs,
    devices,
    over,
    ...(ctx.push.configured ? { push: { bundleId: ctx.push.bundleId!, androidAppId: ctx.push.androidAppId! } } : {}),
  };
}

/** One open-loop step of call lifecycles (or answer storms) across the generators, merged. */

export const STEP_ORDER = [
  'create',
  'invite (ws)',
  'push: APNs invite',
  'push: FCM invite',
  'answer',
  'answer → accepted (ws)',
  'answer → answeredElsewhere (ws)',
  'end',
  'end → ended (ws)',
  'lifecycle',
];

/** The generators' counts summed (`errors` also counts the push providers' refusals). */
export interface StepResult extends CallCounts {
  label: string;
  targetRate: number;
  durationMs: number;
  /** Completed lifecycles per second over the step (first start to last finish). */
  achievedRate: number;
  latency: Record<string, HistogramSummary>;
  push: { statuses: Record<string, number> } | undefined;
  generator: { maxShare: number; totalShare: number; bound: boolean; perProcess: number[]; maxLagMs: number };
  cpu: CpuShares;
  /** What one completed lifecycle cost: CPU ms per process, Redis commands by name. */
  cost: {
    cpuMsPerLifecycle: Record<string, number>;
    redisCommandsPerLifecycle: Record<string, number>;
    redisCallsPerLifecycle: number;
    /** Batches of commands Redis read from its clients (INFO total_reads_processed): round trips. */
    redisRoundTripsPerLifecycle: number;
    /**
     * With --cluster: each primary's Redis commands and CPU per lifecycle, and the spread (the
     * largest deviation of a primary's commands from their mean, as a fraction of the mean).
     */
    perPrimary?: { node: string; commands: number; cpuMs: number }[];
    spread?: number;
  };
  /** Worst p99 over the steps (not the whole lifecycle), and which step. */
  worstP99: { step: string; ms: number };
  pass: boolean;
  boundBy: string;
  /**
   * The push path as the server process running the relay and the push jobs measured it over the
   * step (its Prometheus histograms, so a bound: the p99 is at most the bucket given): from a
   * call change to its relay appending the events (relay_lag_seconds), and the push provider's
   * round trip (push_request_duration_seconds).
   */
  serverHops?: { relayLagP99AtMostMs: number; relayLagCount: number; providerRequestP99AtMostMs: number; providerRequestCount: number };
  /** A closed-loop step: this many lifecycles in flight (its targetRate is not an offered rate). */
  concurrency?: number;
}

export async function runCallStep(
  ctx: BenchContext,
  pool: GeneratorPool,
  p: { label: string; rate: number; durationMs: number; p99LimitMs: number; timeoutMs?: number; settleMaxMs?: number; order?: readonly string[]; concurrency?: number },
): Promise<StepResult> {
  const waited = await ctx.waitIdle(p.settleMaxMs ?? 20_000);
  if (waited > 1500) ctx.log(`    (waited ${(waited / 1000).toFixed(1)} s for the server to finish the previous backlog)`);
  await ctx.collectPush(); // drop what belongs to earlier steps
  const stopCpu = await ctx.cpuWindow(Object.fromEntries(pool.pids().map((pid, i) => [`generator ${i}`, pid])));
  const stats0 = await ctx.commandStats();
  const primaries0 = ctx.cluster ? await ctx.perPrimary() : undefined;
  const reads0 = (await ctx.redisInfo()).readsProcessed;
  // What the process running the relay and the push jobs measured of itself over the step.
  const hopsProc = ctx.workerProc ?? ctx.mainProc;
  const relay0 = await scrapeHistogram(hopsProc?.listening.metricsPort, RELAY_LAG);
  const provider0 = await scrapeHistogram(hopsProc?.listening.metricsPort, PUSH_REQUEST);
  const t0 = performance.now();
  const startAtMs = nowMs() + 250;
  let lastPrint = 0;
  const live = new Map<number, { started: number; completed: number; errors: number; inflight: number }>();
  const outs = await pool.run<CallsResult>(
    () => ({ label: p.label, rate: p.rate / pool.size, durationMs: p.durationMs, startAtMs, timeoutMs: p.timeoutMs ?? 10_000, ...(p.concurrency ? { concurrency: Math.max(1, Math.round(p.concurrency / pool.size)) } : {}) }),
    (i, data) => {
      live.set(i, data as { started: number; completed: number; errors: number; inflight: number });
      const now = Date.now();
      if (now - lastPrint < 900) return;
      lastPrint = now;
      const t = [...live.values()].reduce((a, b) => ({ started: a.started + b.started, completed: a.completed + b.completed, errors: a.errors + b.errors, inflight: a.inflight + b.inflight }));
      ctx.log(`    ${p.label}: t=${((nowMs() - startAtMs) / 1000).toFixed(0)}s started=${fmtNum(t.started)} done=${fmtNum(t.completed)} errors=${t.errors} in-flight=${t.inflight}`);
    },
  );
  const cpu = await stopCpu();
  const wallMs = performance.now() - t0;
  const stats1 = await ctx.commandStats();
  const primaries1 = primaries0 ? await ctx.perPrimary() : undefined;
  const reads1 = (await ctx.redisInfo()).readsProcessed;
  const relay1 = await scrapeHistogram(hopsProc?.listening.metricsPort, RELAY_LAG);
  const provider1 = await scrapeHistogram(hopsProc?.listening.metricsPort, PUSH_REQUEST);
  const serverHops = relay1 && provider1 ? { relayLag: promDelta(relay1, relay0), providerRequest: promDelta(provider1, provider0) } : undefined;
  const push = await ctx.collectPush();
  const results = outs.map((o) => o.result);
  const errors: Record<string, number> = {};
  const anomalies: Record<string, number> = {};
  const pushSignals: Record<string, number> = {};
  const answers: Record<string, number> = {};
  for (const r of results) {
    for (const [k, v] of Object.entries(r.errors)) countInto(errors, k, v);
    for (const [k, v] of Object.entries(r.anomalies)) countInto(anomalies, k, v);
    for (const [k, v] of Object.entries(r.pushSignals)) countInto(pushSignals, k, v);
    for (const [k, v] of Object.entries(r.answers)) countInto(answers, k, v);
  }
  if (push) for (const [k, v] of Object.entries(push.statuses)) if (!/ 200$| signal /.test(k)) countInto(errors, `push ${k}`, v);
  const latency = mergeHists([...results.map((r) => r.hist), ...(push ? [push.hist] : [])], p.order ?? STEP_ORDER);
  const started = results.reduce((a, r) => a + r.started, 0);
  const completed = results.reduce((a, r) => a + r.completed, 0);
  const spanMs = Math.max(...results.map((r) => r.spanMs), 1);
  const gen = generatorCpu(outs);
  const worst = Object.entries(latency)
    .filter(([k]) => k !== 'lifecycle' && !k.startsWith(PUSH_HOP))
    .reduce((w, [k, s]) => (s.p99 > w.ms ? { step: k, ms: s.p99 } : w), { step: '', ms: 0 });
  const errorCount = Object.values(errors).reduce((a, b) => a + b, 0);
  const per = Math.max(1, completed);
  const cpuMsPerLifecycle = Object.fromEntries(Object.entries(cpu.processes).map(([k, share]) => [k, (share * wallMs) / per]));
  const redisCommandsPerLifecycle: Record<string, number> = {};
  let redisCalls = 0;
  for (const [cmd, v] of Object.entries(stats1)) {
    const d = v.calls - (stats0[cmd]?.calls ?? 0);
    if (d <= 0 || cmd === 'info') continue;
    redisCommandsPerLifecycle[cmd] = d / per;
    redisCalls += d;
  }
  const pass = errorCount === 0 && completed === started && worst.ms < p.p99LimitMs;
  const res: StepResult = {
    label: p.label,
    targetRate: p.rate,
    durationMs: p.durationMs,
    started,
    completed,
    achievedRate: (completed * 1000) / Math.max(spanMs, p.durationMs),
    errors,
    anomalies,
    pushSignals,
    answers,
    latency,
    push: push ? { statuses: push.statuses } : undefined,
    generator: { ...gen, maxLagMs: Math.max(...results.map((r) => r.maxLagMs)) },
    cpu,
    cost: {
      cpuMsPerLifecycle,
      redisCommandsPerLifecycle,
      redisCallsPerLifecycle: redisCalls / per,
      redisRoundTripsPerLifecycle: (reads1 - reads0) / per,
      ...spreadOver(primaries0, primaries1, per),
    },
    worstP99: worst,
    pass,
    boundBy: '',
    ...(serverHops
      ? {
          serverHops: {
            relayLagP99AtMostMs: p99AtMostMs(serverHops.relayLag),
            relayLagCount: serverHops.relayLag.count,
            providerRequestP99AtMostMs: p99AtMostMs(serverHops.providerRequest),
            providerRequestCount: serverHops.providerRequest.count,
          },
        }
      : {}),
    ...(p.concurrency ? { concurrency: p.concurrency } : {}),
  };
  res.boundBy = describeBound(cpu, gen.bound, gen.maxShare);
  return res;
}

/**
 * The highest rate a step passes at, then a sustained run there: grows the rate by `factor`
 * until a step fails (or, when the first fails, halves it until one passes), bisects between the
 * last pass and the first fail, then runs `sustainedMs` at the best rate; a long run sees rarer
 * stalls than a search step, so it steps down by 20 % (at most 3 times) until one passes, and then
 * runs once more halfway between that pass and the lowest failing rate. No
 * search step goes below `minRate`, no sustained run below half of it.
 */
export async function searchAndSustain(
  z: RateSearch,
  firstRate: number,
  minRate: number,
  step: (label: string, rate: number, durationMs: number) => Promise<StepResult>,
): Promise<{ best: number; fail: number; sustained: StepResult }> {
  let best = 0;
  let fail = 0;
  let rate = firstRate;
  for (let i = 0; i < z.maxSteps; i++) {
    const r = await step(`search ${i + 1}`, rate, z.stepMs);
    if (r.pass) {
      best = rate;
      if (fail) break;
      rate = Math.round(rate * z.factor);
    } else {
      fail = rate;
      if (best) break;
      rate = Math.max(minRate, Math.round(rate / 2));
    }
  }
  for (let i = 0; i < z.bisections && fail > 0 && best > 0 && fail - best > best * 0.08; i++) {
    const mid = Math.round((best + fail) / 2);
    const r = await step(`bisect ${i + 1}`, mid, z.stepMs);
    if (r.pass) best = mid;
    else fail = mid;
  }
  if (best === 0) best = Math.max(minRate, Math.round(rate / 2));
  let sustained = await step('sustained', best, z.sustainedMs);
  let failedAt = sustained.pass ? 0 : best;
  for (let retry = 1; !sustained.pass && retry <= 3; retry++) {
    const at = Math.max(minRate / 2, Math.round(best * 0.8 ** retry));
    sustained = await step(`sustained (retry ${retry} at ${Math.round(100 * 0.8 ** retry)}%)`, at, z.sustainedMs);
    if (!sustained.pass) failedAt = at;
  }
  // A pass after a step down: one more run halfway to the lowest failing rate, so that the figure
  // is within 10 % of what the machine sustains, not 20 % (a search with no bisections, the smoke
  // size, skips it).
  if (sustained.pass && failedAt > 0 && z.bisections > 0) {
    const mid = Math.round((sustained.targetRate + failedAt) / 2);
    const r = await step('sustained (halfway to the failing rate)', mid, z.sustainedMs);
    if (r.pass) sustained = r;
  }
  return { best, fail, sustained };
}

/** Per primary (--cluster): what a lifecycle cost on each, and how evenly the commands spread. */
function spreadOver(
  before: { node: string; calls: number; cpuSec: number }[] | undefined,
  after: { node: string; calls: number; cpuSec: number }[] | undefined,
  lifecycles: number,
): { perPrimary?: { node: string; commands: number; cpuMs: number }[]; spread?: number } {
  if (!before || !after) return {};
  const perPrimary = after.map((a, i) => ({
    node: a.node,
    commands: (a.calls - before[i]!.calls) / lifecycles,
    cpuMs: ((a.cpuSec - before[i]!.cpuSec) * 1000) / lifecycles,
  }));
  const mean = perPrimary.reduce((sum, p) => sum + p.commands, 0) / perPrimary.length;
  const spread = Math.max(...perPrimary.map((p) => Math.abs(p.commands - mean) / Math.max(mean, 1e-9)));
  return { perPrimary, spread };
}

/** Names the resource that bounds a run, from the CPU readings taken during it. */
export function describeBound(cpu: CpuShares, generatorBound: boolean, generatorShare: number): string {
  const s = cpu.processes;
  const parts = Object.entries(s)
    .filter(([, v]) => v > 0.005)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${fmtPct(v)}`);
  const disturbed = cpu.otherCores > 0.2 ? `; DISTURBED: processes this run did not start${cpu.remoteTarget ? ' (the --url target among them, if it runs here)' : ''} used ${fmtPct(cpu.otherCores)} of a core` : '';
  const shares = `CPU: ${parts.join(', ')}; machine ${fmtPct(cpu.machineBusy)} of ${cpus().length} cores${disturbed}`;
  if (generatorBound) return `GENERATOR-BOUND (a generator used ${fmtPct(generatorShare)} of a core); ${shares}`;
  const server = Object.entries(s).filter(([k]) => !k.startsWith('generator') && k !== 'redis' && k !== 'push fakes').sort((a, b) => b[1] - a[1])[0];
  if (server && server[1] >= 0.9) return `server process CPU (${server[0]} ${fmtPct(server[1])} of a core: its JavaScript thread is saturated); ${shares}`;
  if ((s.redis ?? 0) >= 0.9) return `Redis CPU (${fmtPct(s.redis ?? 0)} of a core); ${shares}`;
  if (cpu.machineBusy >= 0.9) return `machine CPU (all cores busy: server, Redis and generators share them); ${shares}`;
  return `no single CPU saturated; ${shares}`;
}

/** One line on what a lifecycle cost in a step, and the rate each process's CPU would allow. */
export function costSummary(s: StepResult): string {
  const cpu = Object.entries(s.cost.cpuMsPerLifecycle)
    .filter(([, ms]) => ms > 0.001)
    .sort((a, b) => b[1] - a[1])
    .map(([k, ms]) => `${k} ${ms.toFixed(2)} ms (≤ ${fmtNum(1000 / ms)}/s on one core)`)
    .join(', ');
  const cmds = Object.entries(s.cost.redisCommandsPerLifecycle)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 14)
    .map(([k, n]) => `${k} ${n.toFixed(1)}`)
    .join(', ');
  return (
    `CPU per lifecycle: ${cpu}. Redis commands per lifecycle: ${s.cost.redisCallsPerLifecycle.toFixed(1)} (counted by INFO commandstats, commands inside scripts included): ${cmds}. ` +
    `Redis round trips per lifecycle (batches of commands read, INFO total_reads_processed): ${s.cost.redisRoundTripsPerLifecycle.toFixed(1)}.` +
    (s.cost.perPrimary
      ? ` Per primary (commands, Redis CPU per lifecycle): ${s.cost.perPrimary.map((p) => `${p.node} ${p.commands.toFixed(1)} / ${p.cpuMs.toFixed(3)} ms`).join('; ')}; ` +
        `spread ±${((s.cost.spread ?? 0) * 100).toFixed(0)} % of the mean (${(s.cost.spread ?? 1) <= 0.25 ? 'within' : 'OUTSIDE'} ±25 %).`
      : '')
  );
}

/**
 * The deployment's fixed cost: what it spends a second with its sockets connected and no calls
 * (BullMQ's sweep jobs, the ring sweeps, the relays' blocking reads and leases, timers). Every
 * per-lifecycle figure of a step includes this divided by the step's rate, so at a low rate it
 * weighs more; subtracting it gives what a lifecycle itself costs.
 */
export interface RestCost {
  durationMs: number;
  /** CPU ms a second per measured process (redis included). */
  cpuMsPerSecond: Record<string, number>;
  commandsPerSecond: number;
  roundTripsPerSecond: number;
}

export async function measureRest(ctx: BenchContext, durationMs: number): Promise<RestCost> {
  await ctx.waitIdle(20_000);
  const stopCpu = await ctx.cpuWindow();
  const stats0 = await ctx.commandStats();
  const reads0 = (await ctx.redisInfo()).readsProcessed;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, durationMs));
  const cpu = await stopCpu();
  const seconds = (performance.now() - t0) / 1000;
  const stats1 = await ctx.commandStats();
  const reads1 = (await ctx.redisInfo()).readsProcessed;
  let commands = 0;
  for (const [cmd, v] of Object.entries(stats1)) if (cmd !== 'info') commands += Math.max(0, v.calls - (stats0[cmd]?.calls ?? 0));
  return {
    durationMs,
    cpuMsPerSecond: Object.fromEntries(Object.entries(cpu.processes).map(([k, share]) => [k, share * 1000])),
    commandsPerSecond: commands / seconds,
    // The bench's own INFO reads (two here, two per step) are Redis reads too; they are left in.
    roundTripsPerSecond: (reads1 - reads0) / seconds,
  };
}

/** The fixed cost at rest, and what is left of a step's per-lifecycle cost without it. */
export function restSummary(rest: RestCost, s: StepResult): string {
  const rate = s.achievedRate;
  if (!(rate > 0)) return '';
  const names = ['server', 'server worker', 'redis'].filter((k) => rest.cpuMsPerSecond[k] !== undefined && s.cost.cpuMsPerLifecycle[k] !== undefined);
  const fixed = names.map((k) => `${k} ${rest.cpuMsPerSecond[k]!.toFixed(1)} ms`).join(', ');
  const net = names.map((k) => `${k} ${(s.cost.cpuMsPerLifecycle[k]! - rest.cpuMsPerSecond[k]! / rate).toFixed(2)} ms`).join(', ');
  return (
    `At rest (sockets connected, no calls, ${rest.durationMs / 1000} s, after the warm-up), CPU a second: ${fixed}; ` +
    `${fmtNum(rest.roundTripsPerSecond)} Redis round trips and ${fmtNum(rest.commandsPerSecond)} commands a second. ` +
    `At ${fmtNum(rate)}/s that is ${(rest.roundTripsPerSecond / rate).toFixed(2)} round trips and ${(rest.commandsPerSecond / rate).toFixed(1)} commands of each lifecycle's figures above; ` +
    `without it a lifecycle costs ${net} of CPU, ${(s.cost.redisCallsPerLifecycle - rest.commandsPerSecond / rate).toFixed(1)} Redis commands in ` +
    `${(s.cost.redisRoundTripsPerLifecycle - rest.roundTripsPerSecond / rate).toFixed(1)} round trips.`
  );
}
