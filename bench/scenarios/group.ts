import type { BenchContext } from '../lib/context.js';
import { allOf, cleanStep, invalidReasons } from '../lib/validity.js';
import { GeneratorPool } from '../lib/generators.js';
import { netOfRest, perMemberCost, type PerMemberRow } from '../lib/groupPlan.js';
import { errorList, fmtMs, fmtNum, fmtPct, fmtRate, latencyTable, mdTable, type Goal, type ScenarioResult } from '../lib/report.js';
import { GROUP_STEP_ORDER, type GroupSetup } from '../workers/group.js';
import { costSummary, runCallStep, searchAndSustain, type StepResult } from './callSteps.js';

/**
 * Group calls (docs/group-calls.md, workers/group.ts), open loop: a rate search for the highest
 * rate of group calls with zero errors and every step's p99 under the limit, a sustained run
 * there, and a run at half the sustained rate for the fan-out goal. Each call's cost (CPU of the
 * server processes and Redis, Redis commands and round trips) is divided by its members and set
 * against a one-to-one lifecycle's in the same run.
 */

/** Invitation fan-out to the last socket, p99, at half the sustained rate (issue #34). */
export const GOAL_FANOUT_P99_MS = 20;
/** A member's share of a group call's cost, at most this fraction of a one-to-one lifecycle's. */
export const GOAL_MEMBER_COST_RATIO = 0.5;

const FANOUT = 'invite fan-out, last socket (ws)';
const JOINED = 'join → call.participant (ws)';

export async function groupScenario(ctx: BenchContext): Promise<ScenarioResult> {
  const z = ctx.opts.sizes.group;
  const limit = ctx.opts.p99LimitMs;
  const setup = (gen: number): GroupSetup => ({
    baseUrl: ctx.main.baseUrl,
    wsBase: ctx.main.wsBase,
    secret: ctx.secret,
    tag: `${ctx.tag}g`,
    gen,
    groups: z.groupsPerGenerator,
    members: z.members,
    installations: z.installations,
    joins: z.joins,
    declines: z.declines,
    ...(ctx.push.configured ? { push: { bundleId: ctx.push.bundleId!, androidAppId: ctx.push.androidAppId! } } : {}),
  });
  ctx.log(`  ${ctx.opts.generators} × ${z.groupsPerGenerator} groups of a caller and ${z.members} members × ${z.installations} installations (${fmtNum(ctx.opts.generators * z.groupsPerGenerator * (1 + z.members * z.installations))} sockets)`);
  const pool = await GeneratorPool.start(ctx.opts.generators, 'group', setup);
  const infos = pool.setupInfo as { udpPort: number; route: string }[];
  await ctx.routePush(Object.fromEntries(infos.filter((i) => i.udpPort).map((i) => [i.route, i.udpPort])));
  const steps: StepResult[] = [];
  const step = async (label: string, rate: number, durationMs: number) => {
    ctx.log(`  ${label}: ${fmtRate(rate)} group calls for ${durationMs / 1000} s`);
    const r = await runCallStep(ctx, pool, { label, rate, durationMs, p99LimitMs: limit, timeoutMs: z.timeoutMs, order: GROUP_STEP_ORDER });
    steps.push(r);
    ctx.log(
      `  ${label}: ${r.pass ? 'PASS' : 'FAIL'} ${fmtRate(r.achievedRate)} done ${fmtNum(r.completed)}/${fmtNum(r.started)}, fan-out p99 ${fmtMs(r.latency[FANOUT]?.p99 ?? NaN)}, ` +
        `worst p99 ${fmtMs(r.worstP99.ms)} (${r.worstP99.step}), errors ${errorList(r.errors)}; ${r.boundBy}`,
    );
    return r;
  };
  try {
    ctx.log(`  warm-up (not measured): ${fmtRate(z.warmupRate)} for ${z.warmupMs / 1000} s`);
    await runCallStep(ctx, pool, { label: 'warm-up', rate: z.warmupRate, durationMs: z.warmupMs, p99LimitMs: limit, timeoutMs: z.timeoutMs, order: GROUP_STEP_ORDER });
    const found = ctx.findings.sustainedLifecycleRate;
    const firstRate = z.startRate || (found ? Math.max(5, Math.round(found / z.members / 2)) : 20);
    const { fail, sustained } = await searchAndSustain(z, firstRate, 2, step);
    const halfSustained = await step('half the sustained rate', Math.max(1, Math.round(sustained.targetRate / 2)), z.halfMs);
    // Capacity: closed loop, each group call started as one ends (lib/openLoop.ts closedLoop).
    let saturated: StepResult | undefined;
    if (z.saturatedConcurrency > 0) {
      ctx.log(`  saturated (closed loop): ${z.saturatedConcurrency} group calls in flight for ${z.saturatedMs / 1000} s`);
      saturated = await runCallStep(ctx, pool, { label: `saturated (closed loop, ${z.saturatedConcurrency} in flight)`, rate: 0, concurrency: z.saturatedConcurrency, durationMs: z.saturatedMs, p99LimitMs: Infinity, timeoutMs: z.timeoutMs, order: GROUP_STEP_ORDER });
      ctx.log(`  saturated: ${fmtRate(saturated.achievedRate)} group calls done ${fmtNum(saturated.completed)}/${fmtNum(saturated.started)}, errors ${errorList(saturated.errors)}; ${saturated.boundBy}`);
      await ctx.waitIdle(30_000);
    }
    return report(ctx, steps, sustained, halfSustained, fail, saturated);
  } finally {
    await pool.close();
  }
}

function report(ctx: BenchContext, steps: StepResult[], sustained: StepResult, half: StepResult, failedAt: number, saturated?: StepResult): ScenarioResult {
  const z = ctx.opts.sizes.group;
  const sockets = z.members * z.installations;
  const sustainedRate = sustained.pass ? sustained.achievedRate : 0;
  const fanout = half.latency[FANOUT];
  const joined = half.latency[JOINED];
  const halfClean = Object.keys(half.errors).length === 0 && half.completed === half.started;
  const one = ctx.findings.oneToOneCost;
  // The goal is judged without the deployment's fixed cost (measured at rest by the lifecycle
  // scenario), which each figure carries divided by its own run's rate; the gross figures follow.
  const rows: PerMemberRow[] = one
    ? perMemberCost(netOfRest(sustained.cost, one.rest, sustained.achievedRate), z.members, netOfRest(one, one.rest, one.rate), GOAL_MEMBER_COST_RATIO)
    : [];
  const grossRows: PerMemberRow[] = one ? perMemberCost(sustained.cost, z.members, one, GOAL_MEMBER_COST_RATIO) : [];
  const above = steps.filter((s) => !s.pass && s.targetRate > sustained.targetRate).sort((a, b) => a.targetRate - b.targetRate)[0];
  const rateLimit = above
    ? `At ${fmtRate(above.targetRate)} ${above.worstP99.step} p99 reached ${fmtMs(above.worstP99.ms)}${Object.keys(above.errors).length ? ` with errors (${errorList(above.errors)})` : ''}; ${above.boundBy}`
    : `Bound: ${sustained.boundBy}`;
  const fmtCost = (metric: string, n: number) => (metric.startsWith('CPU') ? `${n.toFixed(2)} ms` : fmtNum(n, 1));
  const quick = ctx.opts.sizes.mode !== 'full';

  const goals: Goal[] = [
    {
      goal: `invitation fan-out to the last of ${sockets} sockets p99 < ${GOAL_FANOUT_P99_MS} ms at half the sustained rate`,
      target: `< ${GOAL_FANOUT_P99_MS} ms`,
      measured: fanout
        ? `p99 ${fmtMs(fanout.p99)} (p50 ${fmtMs(fanout.p50)}) at ${fmtRate(half.achievedRate)} group calls, errors: ${errorList(half.errors)}`
        : 'no sample',
      status: fanout && fanout.count > 0 && halfClean && fanout.p99 < GOAL_FANOUT_P99_MS ? 'MET' : 'MISSED',
      atGoalSize: !quick,
      note: `${quick ? `quick run: ${half.durationMs / 1000} s. ` : ''}Bound: ${half.boundBy}`,
    },
    ...(rows.length
      ? rows.map(
          (r): Goal => ({
            goal: `${r.metric} per member of a group call ≤ ${GOAL_MEMBER_COST_RATIO}× a one-to-one lifecycle's`,
            target: `≤ ${fmtCost(r.metric, r.oneToOne * GOAL_MEMBER_COST_RATIO)}`,
            measured: `${fmtCost(r.metric, r.perMember)} per member (${fmtCost(r.metric, r.perCall)} per call of ${z.members}) vs ${fmtCost(r.metric, r.oneToOne)} per one-to-one lifecycle: ${r.ratio.toFixed(2)}×`,
            status: r.met ? 'MET' : 'MISSED',
            atGoalSize: !quick,
            note:
              `group sustained run at ${fmtRate(sustained.achievedRate)}${sustained.pass ? '' : ' (failing its p99 limit)'}, one-to-one at ${fmtRate(one!.rate)}; both without the deployment's fixed cost ` +
              `(${fmtNum(one!.rest.commandsPerSecond)} Redis commands and ${fmtNum(one!.rest.roundTripsPerSecond)} round trips a second at rest). What a group call spends: ${costSummary(sustained)}`,
          }),
        )
      : [
          {
            goal: `cost per member of a group call ≤ ${GOAL_MEMBER_COST_RATIO}× a one-to-one lifecycle's`,
            target: `≤ ${GOAL_MEMBER_COST_RATIO}×`,
            measured: 'not measured: the lifecycle scenario did not run in this run (run with --scenarios lifecycle,group)',
            status: 'NOT MEASURED' as const,
            atGoalSize: false,
            note: '',
          },
        ]),
  ];

  const stepRows = steps.map((s) => [
    s.label,
    fmtRate(s.targetRate),
    fmtRate(s.achievedRate),
    `${fmtNum(s.completed)}/${fmtNum(s.started)}`,
    fmtMs(s.latency[FANOUT]?.p99 ?? NaN),
    fmtMs(s.latency[JOINED]?.p99 ?? NaN),
    `${fmtMs(s.worstP99.ms)} (${s.worstP99.step})`,
    errorList(s.errors),
    fmtPct(s.generator.maxShare) + (s.generator.bound ? ' GENERATOR-BOUND' : ''),
    s.pass ? 'pass' : 'FAIL',
  ]);
  const md = [
    `Each group call: the caller creates it with \`calleeUserIds\` (${z.members} members, ${z.installations} installations each, every one with its socket${ctx.push.configured ? ' and a push token, iOS VoIP and Android alternately' : ''}) → ` +
      `\`call.invited\` on all ${sockets} sockets${ctx.push.configured ? ` and ${sockets} pushes at the fake APNs/FCM` : ''} → ${z.joins} members join one after the other ` +
      `(\`call.participant\` at every participant already in the call, \`call.ended answeredElsewhere\` at the joiner's other installations) → ${z.declines ? 'one member declines (its other installations stop ringing, the participants are told) → ' : ''}` +
      `the caller ends the call for all: \`call.ended remoteEnded\` at the joiners and at every installation still ringing. No ringing receipts are sent. ` +
      `Every event each installation must get is checked, and any other counted as an anomaly. Open loop, latencies from the scheduled start (create, invitations) or from each request; ` +
      `a step passes with zero errors, every call complete and every step's p99 under ${ctx.opts.p99LimitMs} ms.`,
    '',
    mdTable(['step', 'target', 'achieved', 'done', 'fan-out (last socket) p99', 'join→participant p99', 'worst step p99', 'errors', 'generator CPU', 'result'], stepRows),
    '',
    `**Sustained**: ${fmtRate(sustained.achievedRate)} group calls for ${sustained.durationMs / 1000} s at target ${fmtRate(sustained.targetRate)}, ${sustained.pass ? 'passing' : 'FAILING'}` +
      `${failedAt ? ` (a search step failed at ${fmtRate(failedAt)})` : ''}: ${fmtRate(sustainedRate * z.members)} member invitations and ${fmtRate(sustainedRate * sockets)} socket invitations a second; errors: ${errorList(sustained.errors)}.`,
    '',
    `What limits the rate: ${rateLimit}.`,
    '',
    `At half the sustained rate (${fmtRate(half.achievedRate)}): fan-out to the last socket p99 ${fmtMs(fanout?.p99 ?? NaN)}, join → \`call.participant\` p99 ${fmtMs(joined?.p99 ?? NaN)} ` +
      `at the other participants; errors: ${errorList(half.errors)}. ${half.boundBy}.`,
    '',
    '### Cost per member against a one-to-one lifecycle (sustained runs)',
    '',
    rows.length
      ? mdTable(
          ['', 'per group call', 'per member', 'one-to-one lifecycle', 'member ÷ one-to-one', `goal ≤ ${GOAL_MEMBER_COST_RATIO}×`],
          [
            ...rows.map((r) => [`${r.metric}, without the fixed cost`, fmtCost(r.metric, r.perCall), fmtCost(r.metric, r.perMember), fmtCost(r.metric, r.oneToOne), `${r.ratio.toFixed(2)}×`, r.met ? 'met' : 'MISSED']),
            ...grossRows.map((r) => [`${r.metric}, as measured (fixed cost ÷ rate included)`, fmtCost(r.metric, r.perCall), fmtCost(r.metric, r.perMember), fmtCost(r.metric, r.oneToOne), `${r.ratio.toFixed(2)}×`, '']),
          ],
        )
      : 'Not measured: the lifecycle scenario did not run in this run.',
    '',
    `Cost per group call (sustained run): ${costSummary(sustained)}`,
    '',
    saturated
      ? `**Saturated** (closed loop, ${fmtNum(saturated.concurrency ?? 0)} group calls in flight for ${saturated.durationMs / 1000} s): **${fmtRate(saturated.achievedRate)}** group calls, ${fmtNum(saturated.completed)}/${fmtNum(saturated.started)} complete, errors: ${errorList(saturated.errors)}. ` +
        `CPU per process there (share of one core): ${Object.entries(saturated.cpu.processes).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${fmtPct(v)}`).join(', ')}; ${saturated.boundBy}. Sustained ÷ saturated: ${saturated.achievedRate > 0 ? (sustainedRate / saturated.achievedRate).toFixed(2) : 'n/a'}×.`
      : '',
    '',
    `### Per-step latency, sustained run (${fmtRate(sustained.targetRate)})`,
    '',
    latencyTable(sustained.latency),
    '',
    `### Per-step latency at half the sustained rate (${fmtRate(half.targetRate)})`,
    '',
    latencyTable(half.latency),
    '',
    `Anomalies (events duplicated or unexpected; not errors unless listed above): sustained ${errorList(sustained.anomalies)}; half rate ${errorList(half.anomalies)}. ` +
      `Android push signals accepted by the fake FCM (expected for the members whose ringing stops): ${errorList(sustained.pushSignals)}.`,
  ].join('\n');

  return {
    id: 'group',
    title: `Group calls (${z.members} members × ${z.installations} installations)`,
    headlines: [
      {
        metric: `sustained group calls/s (${z.members} members × ${z.installations} sockets, 0 errors, p99 < ${ctx.opts.p99LimitMs} ms)`,
        value: sustained.pass ? `${fmtRate(sustainedRate)} for ${sustained.durationMs / 1000} s` : `none: ${fmtRate(sustained.targetRate)} failed (${errorList(sustained.errors)})`,
        figure: sustainedRate,
        ceiling: one ? `one-to-one ${fmtRate(one.rate)}` : 'n/a',
        ratio: one && one.rate > 0 ? `${((sustainedRate * z.members) / one.rate).toFixed(2)}× in members/s` : 'n/a',
        bound: rateLimit,
      },
      ...(saturated
        ? [{ metric: `saturated group calls/s (closed loop, ${fmtNum(saturated.concurrency ?? 0)} in flight)`, value: fmtRate(saturated.achievedRate), figure: saturated.achievedRate, ceiling: 'sustained (same run)', ratio: saturated.achievedRate > 0 ? `${(sustainedRate / saturated.achievedRate).toFixed(2)}× sustained ÷ saturated` : 'n/a', bound: saturated.boundBy }]
        : []),
      {
        metric: `invitation fan-out to the last socket p99 / join → call.participant p99, at half the sustained rate`,
        value: `${fmtMs(fanout?.p99 ?? NaN)} / ${fmtMs(joined?.p99 ?? NaN)} at ${fmtRate(half.achievedRate)}`,
        ceiling: `goal ${GOAL_FANOUT_P99_MS} ms`,
        ratio: fanout ? `${(fanout.p99 / GOAL_FANOUT_P99_MS).toFixed(2)}× goal` : 'n/a',
        bound: half.boundBy,
      },
      ...rows.map((r) => ({
        metric: `${r.metric} per member ÷ one-to-one lifecycle (without the fixed cost)`,
        value: `${fmtCost(r.metric, r.perMember)} vs ${fmtCost(r.metric, r.oneToOne)}`,
        ceiling: `goal ≤ ${GOAL_MEMBER_COST_RATIO}×`,
        ratio: `${r.ratio.toFixed(2)}×`,
      })),
    ],
    goals,
    markdown: md,
    data: { steps, sustained: sustained.label, half: half.label, failedAt, perMember: rows, perMemberGross: grossRows, oneToOne: one ?? null, saturated },
    invalid: invalidReasons(
      allOf(
        { nonZero: [{ what: 'sustained group calls/s (no sustained run passed)', n: sustainedRate }, ...(saturated ? [{ what: 'saturated group calls/s (closed loop)', n: saturated.achievedRate }] : []), { what: 'invitation fan-out samples at half the sustained rate', n: fanout?.count }, { what: 'join → call.participant samples at half the sustained rate', n: joined?.count }] },
        cleanStep('the run at half the sustained rate', half),
      ),
    ),
  };
}
