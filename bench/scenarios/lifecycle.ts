import { cpus } from 'node:os';
import type { BenchContext } from '../lib/context.js';
import { errorList, fmtMs, fmtNum, fmtPct, fmtRate, latencyTable, mdTable, ratio, type Goal, type ScenarioResult } from '../lib/report.js';
import { allOf, cleanStep, invalidReasons } from '../lib/validity.js';
import { PUSH_HOP } from '../lib/callGenerator.js';
import { costSummary, measureRest, restSummary, runCallStep, searchAndSustain, startCallsPool, type RestCost, type StepResult } from './callSteps.js';

/**
 * Full lifecycles at target arrival rates (open loop): a search for the highest rate with zero
 * errors and every step's p99 under the limit, a sustained run at that rate, and a run at half
 * the goal rate for the answer-to-`call.accepted` latency goal.
 */

export const GOAL_RATE = 2500;
export const GOAL_SUSTAIN_MS = 60_000;
export const GOAL_ACCEPTED_P99_MS = 5;
/** Sustained lifecycles/s with answer and end as socket frames, as a multiple of the same over HTTP. */
export const GOAL_SOCKET_FACTOR = 1.3;
/** How long the fixed cost at rest is measured (callSteps.ts measureRest): /proc counts CPU in 10 ms ticks. */
const REST_MS = 5000;

/** One mode's measurements: the search, the sustained run, and the runs at half the goal and half the sustained rate. */
interface Measured {
  over: 'http' | 'socket';
  steps: StepResult[];
  sustained: StepResult;
  half: StepResult | undefined;
  halfSustained: StepResult;
  failedAt: number;
  rest: RestCost;
  /** Closed loop with enough in flight to saturate: the capacity, and each process's CPU there. */
  saturated: StepResult | undefined;
}

export async function lifecycleScenario(ctx: BenchContext): Promise<ScenarioResult> {
  const over = ctx.opts.over;
  if (over !== 'both') return report(ctx, await measure(ctx, over));
  // Both in one run, HTTP first: the ratio of their sustained rates compares like with like.
  const http = await measure(ctx, 'http');
  const socket = await measure(ctx, 'socket');
  return withSocketComparison(ctx, report(ctx, http), http, socket);
}

async function measure(ctx: BenchContext, over: 'http' | 'socket'): Promise<Measured> {
  const z = ctx.opts.sizes.lifecycle;
  const limit = ctx.opts.p99LimitMs;
  const pool = await startCallsPool(ctx, z.pairsPerGenerator, 1, over);
  const steps: StepResult[] = [];
  const mode = over === 'socket' ? ' [socket]' : '';
  const step = async (label: string, rate: number, durationMs: number) => {
    ctx.log(`  ${label}${mode}: ${fmtRate(rate)} for ${durationMs / 1000} s`);
    const r = await runCallStep(ctx, pool, { label, rate, durationMs, p99LimitMs: limit, timeoutMs: z.timeoutMs });
    steps.push(r);
    ctx.log(
      `  ${label}${mode}: ${r.pass ? 'PASS' : 'FAIL'} ${fmtRate(r.achievedRate)} done ${fmtNum(r.completed)}/${fmtNum(r.started)}, ` +
        `worst p99 ${fmtMs(r.worstP99.ms)} (${r.worstP99.step}), errors ${errorList(r.errors)}; ${r.boundBy}`,
    );
    return r;
  };
  try {
    // Warm-up, not measured: JIT compilation, HTTP/2 sessions to the providers, the FCM access
    // token and connection pools would otherwise land in the first measured steps (args.ts RateSearch).
    ctx.log(`  warm-up${mode} (not measured): ${fmtRate(z.warmupRate)} for ${z.warmupMs / 1000} s`);
    await runCallStep(ctx, pool, { label: 'warm-up', rate: z.warmupRate, durationMs: z.warmupMs, p99LimitMs: limit, timeoutMs: z.timeoutMs });
    const rest = await measureRest(ctx, ctx.opts.sizes.mode === 'smoke' ? 1000 : REST_MS);
    ctx.log(`  at rest: ${fmtNum(rest.roundTripsPerSecond)} Redis round trips/s, ${fmtNum(rest.commandsPerSecond)} commands/s`);
    const firstRate = z.startRate || Math.round(Math.min(2000, Math.max(100, (ctx.ceilings.redis?.lifecycle ?? 1000) * 0.15)));
    const { best, fail, sustained } = await searchAndSustain(z, firstRate, 10, step);
    const full = ctx.opts.sizes.mode === 'full';
    // What later scenarios size themselves by: the sustained rate, or the best search step's
    // (of the HTTP mode, which every deployment has).
    if (over === 'http' || ctx.opts.over === 'socket') {
      ctx.findings.sustainedLifecycleRate = sustained.pass ? sustained.achievedRate : Math.min(best, sustained.targetRate);
      ctx.findings.oneToOneCost = { ...sustained.cost, rate: sustained.achievedRate, rest };
    }
    // Latency with headroom: the answer-to-accepted goal of the socket mode is taken here.
    const halfSustained = await step('half the sustained rate', Math.max(5, Math.round(sustained.targetRate / 2)), z.halfGoalMs);
    // Beyond what it sustains, the system only piles up a backlog: a quick run reports the goal
    // as missed by construction (and the latency at the sustained rate); a full run measures a
    // short burst anyway.
    const overloaded = sustained.targetRate < (GOAL_RATE / 2) * 0.8;
    let half: StepResult | undefined;
    if (!overloaded) half = await step('half goal rate', GOAL_RATE / 2, z.halfGoalMs);
    else if (full) half = await step('half goal rate (beyond the sustained rate: short burst)', GOAL_RATE / 2, Math.min(z.halfGoalMs, 2000));
    if (half && !half.pass) await ctx.waitIdle(60_000);
    // Capacity: closed loop, each lifecycle started as one ends, with enough in flight to keep
    // every process busy. Its latency is no goal's; its rate is what the deployment gives at most.
    let saturated: StepResult | undefined;
    if (z.saturatedConcurrency > 0) {
      ctx.log(`  saturated${mode} (closed loop): ${z.saturatedConcurrency} in flight for ${z.saturatedMs / 1000} s`);
      saturated = await runCallStep(ctx, pool, { label: `saturated (closed loop, ${z.saturatedConcurrency} in flight)`, rate: 0, concurrency: z.saturatedConcurrency, durationMs: z.saturatedMs, p99LimitMs: Infinity, timeoutMs: z.timeoutMs });
      ctx.log(`  saturated${mode}: ${fmtRate(saturated.achievedRate)} done ${fmtNum(saturated.completed)}/${fmtNum(saturated.started)}, errors ${errorList(saturated.errors)}; ${saturated.boundBy}`);
      await ctx.waitIdle(30_000);
    }
    return { over, steps, sustained, half, halfSustained, failedAt: fail, rest, saturated };
  } finally {
    await pool.close();
  }
}

/** The HTTP report with the socket mode's figures beside it (`--over both`). */
function withSocketComparison(ctx: BenchContext, r: ScenarioResult, http: Measured, socket: Measured): ScenarioResult {
  const rate = (m: Measured) => (m.sustained.pass ? m.sustained.achievedRate : 0);
  const accepted = socket.halfSustained.latency['answer → accepted (ws)'];
  const acceptedHttp = http.halfSustained.latency['answer → accepted (ws)'];
  const factor = rate(http) > 0 ? rate(socket) / rate(http) : NaN;
  const socketReport = report(ctx, socket);
  const goals: Goal[] = [
    {
      goal: `sustained lifecycles/s with answer and end as socket frames ≥ ${GOAL_SOCKET_FACTOR}× over HTTP (same run)`,
      target: `≥ ${GOAL_SOCKET_FACTOR}×`,
      measured: `${Number.isFinite(factor) ? `${factor.toFixed(2)}×` : 'n/a'} (${fmtRate(rate(socket))} vs ${fmtRate(rate(http))}; errors: socket ${errorList(socket.sustained.errors)}, HTTP ${errorList(http.sustained.errors)})`,
      status: Number.isFinite(factor) && factor >= GOAL_SOCKET_FACTOR ? 'MET' : 'MISSED',
      atGoalSize: socket.sustained.durationMs >= GOAL_SUSTAIN_MS,
      note: `Bound (socket, sustained): ${socket.sustained.boundBy}`,
    },
    {
      goal: `answer (as a frame) → call.accepted p99 < ${GOAL_ACCEPTED_P99_MS} ms at half the sustained rate`,
      target: `< ${GOAL_ACCEPTED_P99_MS} ms`,
      measured: accepted
        ? `p99 ${fmtMs(accepted.p99)} (p50 ${fmtMs(accepted.p50)}) at ${fmtRate(socket.halfSustained.achievedRate)}; over HTTP at ${fmtRate(http.halfSustained.achievedRate)}: p99 ${fmtMs(acceptedHttp?.p99 ?? NaN)}`
        : 'no sample',
      status: accepted && accepted.count > 0 && Object.keys(socket.halfSustained.errors).length === 0 && accepted.p99 < GOAL_ACCEPTED_P99_MS ? 'MET' : 'MISSED',
      atGoalSize: ctx.opts.sizes.mode === 'full',
      note: `Bound: ${socket.halfSustained.boundBy}`,
    },
  ];
  return {
    ...r,
    headlines: [
      ...r.headlines,
      {
        metric: 'sustained lifecycles/s, answer and end as socket frames ÷ over HTTP (same run)',
        value: `${fmtRate(rate(socket))} vs ${fmtRate(rate(http))}`,
        ceiling: 'over HTTP (same run)',
        ratio: Number.isFinite(factor) ? `${factor.toFixed(2)}×` : 'n/a',
        bound: socket.sustained.boundBy,
      },
      {
        metric: 'answer (as a frame) → call.accepted p99 at half the sustained rate',
        value: accepted ? `${fmtMs(accepted.p99)} at ${fmtRate(socket.halfSustained.achievedRate)}` : 'no sample',
        ceiling: `goal ${GOAL_ACCEPTED_P99_MS} ms`,
        ratio: accepted ? `${(accepted.p99 / GOAL_ACCEPTED_P99_MS).toFixed(2)}× goal` : 'n/a',
        bound: socket.halfSustained.boundBy,
      },
    ],
    goals: [...r.goals, ...goals],
    invalid: [...(r.invalid ?? []), ...(socketReport.invalid ?? [])],
    markdown: `${r.markdown}\n\n### Answer and end as socket frames (\`--over both\`: the same search, devices send commands on their sockets)\n\n${socketReport.markdown}`,
    data: { ...(r.data as object), socket: socketReport.data },
  };
}

function report(ctx: BenchContext, m: Measured): ScenarioResult {
  const { steps, sustained, half, failedAt, rest } = m;
  /** HTTP requests a lifecycle makes: create, answer and end, or only create with commands over the socket. */
  const requests = m.over === 'socket' ? 1 : 3;
  const acceptedHalfSustained = m.halfSustained.latency['answer → accepted (ws)'];
  const redisCeiling = ctx.ceilings.redis?.lifecycle;
  const httpCeiling = ctx.ceilings.http?.requestsPerSecond;
  const sustainedRate = sustained.pass ? sustained.achievedRate : 0;
  const accepted = half?.latency['answer → accepted (ws)'];
  const acceptedAtSustained = sustained.latency['answer → accepted (ws)'];
  const notRun = `not run: the highest sustained rate (${fmtRate(sustained.targetRate)}) is far below ${fmtNum(GOAL_RATE / 2)}/s, where the system would only pile up a backlog; answer → accepted p99 at ${fmtRate(sustained.targetRate)} is ${fmtMs(acceptedAtSustained?.p99 ?? NaN)}`;
  const quick = ctx.opts.sizes.mode !== 'full';
  const pushNote = ctx.push.configured ? '' : `Push step: not measured: ${ctx.push.reason}.`;
  // What stops a higher rate: the lowest failing step above the sustained one.
  const above = steps.filter((s) => !s.pass && s.targetRate > sustained.targetRate).sort((a, b) => a.targetRate - b.targetRate)[0];
  const c = sustained.cost.cpuMsPerLifecycle;
  const limit =
    (above
      ? `At ${fmtRate(above.targetRate)} ${above.worstP99.step} p99 reached ${fmtMs(above.worstP99.ms)}${Object.keys(above.errors).length ? ` with errors (${errorList(above.errors)})` : ''}; ${above.boundBy}. `
      : '') +
    `Per lifecycle: ${serverCost(c)}Redis ${(c.redis ?? NaN).toFixed(2)} ms, ` +
    `${fmtNum(sustained.cost.redisCallsPerLifecycle)} Redis commands in ${fmtNum(sustained.cost.redisRoundTripsPerLifecycle, 1)} round trips` +
    `${roundTripCost(sustained.cost.redisRoundTripsPerLifecycle, ctx.ceilings.roundTrip)}. ${machineBound(sustained, steps, ctx.selfHosted)}`;

  const goals: Goal[] = [
    {
      goal: `≥ ${fmtNum(GOAL_RATE)} full lifecycles/s sustained ${GOAL_SUSTAIN_MS / 1000} s, no errors`,
      target: `${fmtNum(GOAL_RATE)}/s for ${GOAL_SUSTAIN_MS / 1000} s`,
      measured: `${fmtRate(sustained.achievedRate)} for ${sustained.durationMs / 1000} s at target ${fmtRate(sustained.targetRate)}, errors: ${errorList(sustained.errors)}`,
      status: sustained.pass && sustained.achievedRate >= GOAL_RATE * 0.99 ? 'MET' : 'MISSED',
      atGoalSize: sustained.durationMs >= GOAL_SUSTAIN_MS,
      note: `${sustained.durationMs < GOAL_SUSTAIN_MS ? `quick run sustains ${sustained.durationMs / 1000} s (--full: 60 s). ` : ''}${limit}`,
    },
    {
      goal: '≥ half of the Redis-bound ceiling',
      target: redisCeiling ? `≥ ${fmtRate(redisCeiling / 2)} (ceiling ${fmtRate(redisCeiling)})` : '0.5× ceiling',
      measured: redisCeiling ? `${ratio(sustainedRate, redisCeiling)} of the ceiling` : 'ceiling not measured in this run',
      status: redisCeiling === undefined ? 'NOT MEASURED' : sustainedRate >= redisCeiling / 2 ? 'MET' : 'MISSED',
      atGoalSize: sustained.durationMs >= GOAL_SUSTAIN_MS,
      note: `Bound: ${sustained.boundBy}`,
    },
    {
      goal: `answer → call.accepted p99 < ${GOAL_ACCEPTED_P99_MS} ms at ${fmtNum(GOAL_RATE / 2)}/s`,
      target: `< ${GOAL_ACCEPTED_P99_MS} ms`,
      measured: !half ? notRun : accepted ? `p99 ${fmtMs(accepted.p99)} (p50 ${fmtMs(accepted.p50)}) at ${fmtRate(half.achievedRate)} of ${fmtRate(half.targetRate)}, errors: ${errorList(half.errors)}` : 'no sample',
      status: half && accepted && accepted.count > 0 && Object.keys(half.errors).length === 0 && accepted.p99 < GOAL_ACCEPTED_P99_MS ? 'MET' : 'MISSED',
      atGoalSize: !quick,
      note: half ? `${quick ? `quick run: ${half.durationMs / 1000} s. ` : ''}Bound: ${half.boundBy}` : `Bound: ${sustained.boundBy}`,
    },
  ];

  const worstNonPush = (s: StepResult) =>
    Object.entries(s.latency)
      .filter(([k]) => k !== 'lifecycle' && !k.startsWith('push'))
      .reduce((w, [k, v]) => (v.p99 > w.ms ? { step: k, ms: v.p99 } : w), { step: '', ms: 0 });
  const passWithoutPush = steps.filter((s) => Object.keys(s.errors).length === 0 && s.completed === s.started && worstNonPush(s).ms < ctx.opts.p99LimitMs);
  const bestWithoutPush = passWithoutPush.reduce((b, s) => Math.max(b, s.targetRate), 0);
  const stepRows = steps.map((s) => [
    s.label,
    fmtRate(s.targetRate),
    fmtRate(s.achievedRate),
    `${fmtNum(s.completed)}/${fmtNum(s.started)}`,
    fmtMs(s.latency['create']?.p99 ?? NaN),
    fmtMs(s.latency['answer → accepted (ws)']?.p99 ?? NaN),
    `${fmtMs(s.worstP99.ms)} (${s.worstP99.step})`,
    fmtMs(worstNonPush(s).ms),
    errorList(s.errors),
    fmtPct(s.generator.maxShare) + (s.generator.bound ? ' GENERATOR-BOUND' : ''),
    s.pass ? 'pass' : 'FAIL',
  ]);

  const capacity = capacitySection(ctx, m, above);
  const md = [
    capacity.markdown,
    '',
    (m.over === 'socket' ? 'Answer and end go as command frames on the devices\' signaling sockets (`--over socket`, docs/signaling.md "Commands"); create stays an HTTP request. ' : '') +
      `Open loop: lifecycle starts are scheduled at fixed intervals from the target rate and every latency is measured from the scheduled start (no coordinated omission). ` +
      `Each lifecycle: create → \`call.invited\` on the callee's socket${ctx.push.configured ? ' and a push at the fake APNs/FCM' : ''} → the callee answers → \`call.accepted\` on the caller's socket → the caller ends → \`call.ended\` on the callee's socket ` +
      `(the caller's own end is confirmed by its HTTP response: the audience rules never echo a device's own action back to it). ` +
      `A step passes with zero errors, every lifecycle complete and every step's p99 under ${ctx.opts.p99LimitMs} ms. ${pushNote}`,
    '',
    mdTable(['step', 'target', 'achieved', 'done', 'create p99', 'answer→accepted p99', 'worst step p99', 'worst p99 without the push legs', 'errors', 'generator CPU', 'result'], stepRows),
    '',
    ctx.push.configured
      ? `Without the push legs in the p99 criterion (HTTP and WebSocket steps only), the highest passing step was ${bestWithoutPush ? fmtRate(bestWithoutPush) : 'none'}.`
      : '',
    '',
    `**Highest passing rate**: ${fmtRate(sustained.targetRate)}${failedAt ? ` (failed at ${fmtRate(failedAt)})` : ''}. ` +
      `**Sustained**: ${fmtRate(sustained.achievedRate)} for ${sustained.durationMs / 1000} s, ${sustained.pass ? 'passing' : 'FAILING'}; errors: ${errorList(sustained.errors)}.`,
    '',
    `Ratios: ${ratio(sustainedRate, redisCeiling)} of the Redis-bound ceiling (${redisCeiling ? fmtRate(redisCeiling) : 'n/a'} lifecycles/s); ` +
      `${ratio(sustainedRate * requests, httpCeiling)} of the raw uWS HTTP ceiling (${httpCeiling ? fmtRate(httpCeiling) : 'n/a'} requests/s; a lifecycle makes ${requests} HTTP request${requests > 1 ? 's' : ''}).`,
    '',
    `At half the sustained rate (${fmtRate(m.halfSustained.achievedRate)}): answer → call.accepted p99 ${fmtMs(acceptedHalfSustained?.p99 ?? NaN)} (p50 ${fmtMs(acceptedHalfSustained?.p50 ?? NaN)}), errors: ${errorList(m.halfSustained.errors)}.`,
    '',
    `What limits the rate: ${limit}.`,
    '',
    `CPU during the sustained run: ${sustained.boundBy}.`,
    '',
    `Cost (sustained run): ${costSummary(sustained)}`,
    '',
    restSummary(rest, sustained),
    '',
    `### Per-step latency, sustained run (${fmtRate(sustained.targetRate)})`,
    '',
    latencyTable(sustained.latency),
    '',
    `### Per-step latency at half the goal rate (${fmtNum(GOAL_RATE / 2)}/s)`,
    '',
    half ? latencyTable(half.latency) : `${notRun[0]!.toUpperCase()}${notRun.slice(1)}.`,
    '',
    `Anomalies (events that were duplicated or unexpected; not errors unless listed above): sustained ${errorList(sustained.anomalies)}${half ? `; half rate ${errorList(half.anomalies)}` : ''}.`,
    sustained.push ? `\nPush provider answers (sustained): ${errorList(sustained.push.statuses)}.` : '',
  ].join('\n');

  return {
    id: 'lifecycle',
    title: `Full call lifecycle (open loop)${m.over === 'socket' ? ', answer and end as socket frames' : ''}`,
    headlines: [
      {
        metric: 'sustained lifecycles/s (0 errors, p99 < 50 ms)',
        value: sustained.pass
          ? `${fmtRate(sustainedRate)} for ${sustained.durationMs / 1000} s`
          : `none: ${fmtRate(sustained.targetRate)} for ${sustained.durationMs / 1000} s failed (worst p99 ${fmtMs(sustained.worstP99.ms)}, ${sustained.worstP99.step}; errors: ${errorList(sustained.errors)})`,
        ceiling: redisCeiling ? `Redis-bound ${fmtRate(redisCeiling)}` : 'n/a',
        ratio: ratio(sustainedRate, redisCeiling),
        bound: limit,
        figure: sustainedRate,
      },
      ...capacity.headlines,
      {
        metric: 'HTTP requests/s in the sustained run',
        value: fmtRate(sustainedRate * requests),
        ceiling: httpCeiling ? `raw uWS ${fmtRate(httpCeiling)}` : 'n/a',
        ratio: ratio(sustainedRate * requests, httpCeiling),
      },
      {
        metric: `answer → call.accepted p99 at ${fmtNum(GOAL_RATE / 2)}/s`,
        value: half && accepted ? fmtMs(accepted.p99) : `not run (below ${fmtNum(GOAL_RATE / 2)}/s); ${fmtMs(acceptedAtSustained?.p99 ?? NaN)} at ${fmtRate(sustained.targetRate)}`,
        ceiling: `goal ${GOAL_ACCEPTED_P99_MS} ms`,
        ratio: half && accepted ? `${(accepted.p99 / GOAL_ACCEPTED_P99_MS).toFixed(2)}× goal` : 'n/a',
        bound: half?.boundBy ?? sustained.boundBy,
      },
    ],
    goals,
    markdown: md,
    data: { steps, sustained: sustained.label, half: half?.label, failedAt, rest, saturated: m.saturated, capacity: capacity.data },
    // The sustained run must have passed (else its throughput is 0) and the run at half of it,
    // well within capacity, must be clean; every lifecycle of the sustained run counted its push.
    invalid: invalidReasons(
      allOf(
        { nonZero: [{ what: `sustained lifecycles/s${m.over === 'socket' ? ' [socket]' : ''} (no sustained run passed)`, n: sustainedRate }, ...(m.saturated ? [{ what: 'saturated lifecycles/s (closed loop)', n: m.saturated.achievedRate }] : [])] },
        cleanStep(`the run at half the sustained rate${m.over === 'socket' ? ' [socket]' : ''}`, m.halfSustained),
        { hold: ctx.push.configured ? [{ ok: Object.entries(sustained.latency).some(([k, v]) => k.startsWith('push') && v.count > 0), what: 'no push counted in the sustained run (push is configured)' }] : [] },
      ),
    ),
  };
}

/** What the machine's cores allow at a step's CPU per lifecycle (all measured processes), or NaN. */
function machineBoundRate(s: StepResult): number {
  const total = Object.values(s.cost.cpuMsPerLifecycle).reduce((a, b) => a + b, 0);
  return total > 0 ? (cpus().length * 1000) / total : NaN;
}

/**
 * Issue #50 item 4, "Capacity and what gates it": the saturated throughput (closed loop) with the
 * CPU of each process there; the sustained rate under the latency goal and its ratio to the
 * machine-bound rate; and, when a push step gated the search, that step's p99 hop by hop:
 * scheduled start → create committed (the call and its outbox entry, one script; the generator's
 * clock against the snapshot's createdAtMs, both this machine's time) → relay appended (the
 * worker's relay_lag_seconds, a bucket bound) → push job → request at the fake provider (the
 * generator's) → provider round trip (the worker's push_request_duration_seconds).
 */
function capacitySection(ctx: BenchContext, m: Measured, above: StepResult | undefined): { markdown: string; headlines: ScenarioResult['headlines']; data: unknown } {
  const { sustained, saturated } = m;
  const sustainedRate = sustained.pass ? sustained.achievedRate : 0;
  const bound = machineBoundRate(sustained);
  const lines: string[] = ['### Capacity and what gates it', ''];
  const headlines: ScenarioResult['headlines'] = [];
  if (saturated) {
    const procs = Object.entries(saturated.cpu.processes).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${fmtPct(v)}`).join(', ');
    lines.push(
      `**Saturated** (closed loop, ${fmtNum(saturated.concurrency ?? 0)} lifecycles in flight for ${saturated.durationMs / 1000} s): **${fmtRate(saturated.achievedRate)}**, ` +
        `${fmtNum(saturated.completed)}/${fmtNum(saturated.started)} complete, errors: ${errorList(saturated.errors)}; lifecycle p99 ${fmtMs(saturated.latency['lifecycle']?.p99 ?? NaN)}. ` +
        `CPU per process there (share of one core): ${procs}; machine ${fmtPct(saturated.cpu.machineBusy)} of ${cpus().length} cores. ${saturated.boundBy}.`,
      '',
    );
    headlines.push({ metric: `saturated lifecycles/s (closed loop, ${fmtNum(saturated.concurrency ?? 0)} in flight)`, value: `${fmtRate(saturated.achievedRate)}`, figure: saturated.achievedRate, ceiling: Number.isFinite(bound) ? `machine-bound ${fmtRate(bound)}` : 'n/a', ratio: ratio(saturated.achievedRate, bound), bound: saturated.boundBy });
  }
  lines.push(
    `**Sustained under the latency goal** (every step's p99 < ${ctx.opts.p99LimitMs} ms, no errors): ${fmtRate(sustainedRate)}; the machine-bound rate at the sustained run's CPU per lifecycle is ${Number.isFinite(bound) ? fmtRate(bound) : 'n/a'}, ` +
      `so sustained ÷ machine-bound = **${Number.isFinite(bound) ? (sustainedRate / bound).toFixed(2) : 'n/a'}×** (goal ≥ 0.8×)${saturated ? `; sustained ÷ saturated = ${ratio(sustainedRate, saturated.achievedRate)}` : ''}.` +
      (saturated && Number.isFinite(machineBoundRate(saturated))
        ? ` At the saturated run's CPU per lifecycle (the deployment's fixed costs shared by more lifecycles) the cores would allow ${fmtRate(machineBoundRate(saturated))}: sustained ÷ that = ${(sustainedRate / machineBoundRate(saturated)).toFixed(2)}×.`
        : ''),
    '',
  );
  headlines.push({ metric: 'sustained ÷ machine-bound rate (goal ≥ 0.8×)', value: Number.isFinite(bound) ? `${(sustainedRate / bound).toFixed(2)}×` : 'n/a', figure: Number.isFinite(bound) ? sustainedRate / bound : NaN, ceiling: Number.isFinite(bound) ? `machine-bound ${fmtRate(bound)}` : 'n/a' });
  let breakdown: Record<string, number> | undefined;
  if (above) {
    const gate = above.worstP99;
    lines.push(`**What gated it**: at ${fmtRate(above.targetRate)} (the lowest failing step) ${gate.step} p99 reached ${fmtMs(gate.ms)}${Object.keys(above.errors).length ? ` with errors (${errorList(above.errors)})` : ''}.`, '');
  }
  // The push path hop by hop: of the step a push leg gated, else of the sustained run.
  const gatedByPush = above && above.worstP99.step.startsWith('push') ? above : undefined;
  const of = gatedByPush ?? (ctx.push.configured ? sustained : undefined);
  if (of) {
    const pushLeg = Object.entries(of.latency).filter(([k]) => k.startsWith('push:')).sort((a, b) => b[1].p99 - a[1].p99)[0];
    const gate = gatedByPush ? gatedByPush.worstP99 : { step: pushLeg?.[0] ?? 'push', ms: pushLeg?.[1].p99 ?? NaN };
    lines.push(`The push path hop by hop, ${gatedByPush ? `at ${fmtRate(of.targetRate)}, the step it gated` : `in the sustained run at ${fmtRate(of.targetRate)} (no push leg gated the search)`}:`, '');
    {
      const above = of;
      const hop = (k: string) => above.latency[`${PUSH_HOP} ${k}`]?.p99 ?? NaN;
      const late = hop('scheduled start → create sent');
      const sentToCommit = hop('create sent → create committed');
      const toCommit = hop('scheduled start → create committed');
      const toProvider = hop('create committed → provider request');
      const relay = above.serverHops?.relayLagP99AtMostMs ?? NaN;
      const provider = above.serverHops?.providerRequestP99AtMostMs ?? NaN;
      breakdown = { pushP99: gate.ms, generatorLateness: late, sentToCommit, toCommit, toProvider, relayLagAtMost: relay, providerRoundTripAtMost: provider };
      lines.push(
        mdTable(
          ['hop (push path)', 'p99', 'measured by'],
          [
            ["scheduled start → create sent (the generator's own lateness)", fmtMs(late), 'generator clock'],
            ['create sent → create committed (HTTP, the server, one script: the call and its outbox entry)', fmtMs(sentToCommit), 'snapshot createdAtMs − generator clock'],
            ['scheduled start → create committed', fmtMs(toCommit), 'snapshot createdAtMs − generator clock'],
            ['create committed → relay appended the events (relay read + append)', Number.isFinite(relay) ? `≤ ${fmtMs(relay)}` : '–', "worker's relay_lag_seconds (bucket bound)"],
            ['create committed → request at the provider (relay + push job queue + send)', fmtMs(toProvider), 'fake provider arrival − createdAtMs'],
            ['provider round trip (the push job waits for it)', Number.isFinite(provider) ? `≤ ${fmtMs(provider)}` : '–', "worker's push_request_duration_seconds (bucket bound)"],
            [`${gate.step} (scheduled start → request at the provider)`, fmtMs(gate.ms), 'fake provider'],
          ],
        ),
        '',
      );
      const rest = toProvider - (Number.isFinite(relay) ? relay : 0);
      const parts: [string, number][] = [
        ["the generator's own lateness (scheduled start to the create sent)", late],
        ['the create (request sent to commit)', sentToCommit],
        // A bucket bound can exceed the whole hop it is part of: at most that hop.
        ['the relay (change to events appended; at most, a bucket bound)', Math.min(relay, toProvider)],
        ['the push job after the relay (queue wait, batching, the request)', rest],
      ];
      const largest = parts.filter(([, v]) => Number.isFinite(v)).sort((a, b) => b[1] - a[1])[0];
      if (largest) lines.push(`The ${gate.step} p99 (${fmtMs(gate.ms)}) is mostly in ${largest[0]}: about ${fmtMs(largest[1])}. (p99s of different hops do not add up exactly; the server's figures are bucket bounds.)`, '');
    }
  }
  return { markdown: lines.join('\n'), headlines, data: { saturatedRate: saturated?.achievedRate, sustainedRate, machineBound: bound, machineBoundAtSaturated: saturated ? machineBoundRate(saturated) : undefined, sustainedOverMachineBound: sustainedRate / bound, breakdown } };
}

/** CPU per lifecycle of each server process, and the rate one core would allow it. */
function serverCost(c: Record<string, number>): string {
  const parts = (['server', 'server worker'] as const)
    .filter((k) => c[k] !== undefined && c[k]! > 0)
    .map((k) => `${k} ${c[k]!.toFixed(2)} ms CPU (one core allows ≤ ${fmtNum(1000 / c[k]!)}/s)`);
  return parts.length ? `${parts.join(', ')}, ` : '';
}

/**
 * The rate this machine's cores allow when every process the bench measured (server processes,
 * Redis, generators, push fakes) spends what it spent per lifecycle: what bounds the goal on one
 * machine. Given at the sustained rate and at the busiest step, because the cost per lifecycle
 * falls as the rate rises (more commands share each write).
 */
function machineBound(sustained: StepResult, steps: readonly StepResult[], selfHosted: boolean): string {
  if (!selfHosted) return '';
  const total = (s: StepResult) => Object.values(s.cost.cpuMsPerLifecycle).reduce((a, b) => a + b, 0);
  const at = (s: StepResult) => `${total(s).toFixed(2)} ms at ${fmtRate(s.achievedRate)}, so ${cpus().length} cores allow ≤ ${fmtNum((cpus().length * 1000) / total(s))}/s`;
  if (!(total(sustained) > 0)) return '';
  const busiest = steps.reduce((b, s) => (s.achievedRate > b.achievedRate ? s : b), sustained);
  return `All measured processes together, CPU per lifecycle: ${at(sustained)}${busiest !== sustained && total(busiest) > 0 ? `; ${at(busiest)}` : ''}.`;
}

/** What the round trips alone cost, at the per-round-trip CPU measured in this run's ceilings. */
function roundTripCost(roundTrips: number, rt: { clientUs: number; redisUs: number } | undefined): string {
  if (!rt || !(roundTrips > 0)) return '';
  const ms = (roundTrips * (rt.clientUs + rt.redisUs)) / 1000;
  return ` (at the ${(rt.clientUs + rt.redisUs).toFixed(0)} µs of CPU one round trip costs here, ${ms.toFixed(2)} ms per lifecycle in round trips alone)`;
}
