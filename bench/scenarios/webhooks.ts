import { randomBytes } from 'node:crypto';
import { keys } from '../../src/redis/keys.js';
import { allOf, cleanStep, invalidReasons } from '../lib/validity.js';
import type { BenchContext } from '../lib/context.js';
import { startHelper, type ListeningProcess } from '../lib/processes.js';
import { errorList, fmtMs, fmtNum, fmtRate, mdTable, type Goal, type ScenarioResult } from '../lib/report.js';
import { runCallStep, startCallsPool, type StepResult } from './callSteps.js';

/**
 * Webhooks on the call path (docs/webhooks.md): the same lifecycles against three deployments of
 * their own, one after the other: webhooks off, on (one local receiver answering 204), and on
 * with a receiver that never answers. Each runs at the lifecycle scenario's sustained rate (the
 * cost, and whether the rate still holds), then at half of it (the answer → `call.accepted`
 * latency). It also measures what a call history record costs in Redis (docs/call-history.md).
 */

const DEFAULT_RATE = 200;
/** Goals (issue 25): the rate held with webhooks on, and a hanging receiver's effect on answers. */
const GOAL_RATE_RATIO = 0.85;
const GOAL_HANG_P99_RATIO = 1.2;

type Variant = 'off' | 'on' | 'hang';
interface VariantResult {
  variant: Variant;
  sustained: StepResult;
  half: StepResult;
  received: number;
  history?: { perRecordBytes: number };
}

const LABEL: Record<Variant, string> = { off: 'webhooks off', on: 'webhooks on (receiver answers 204)', hang: 'webhooks on, receiver never answers' };

export async function webhooksScenario(ctx: BenchContext): Promise<ScenarioResult> {
  const z = ctx.opts.sizes.webhooks;
  if (!ctx.selfHosted) throw new Error('the webhooks scenario starts deployments of its own: not with --url');
  const sustainedRate = ctx.findings.sustainedLifecycleRate;
  const rate = Math.max(10, Math.round(z.rate > 0 ? z.rate : sustainedRate ?? DEFAULT_RATE));
  const rateSource = z.rate > 0 ? 'set with --set webhooks.rate' : sustainedRate ? "the lifecycle scenario's sustained rate in this run" : `a default (${DEFAULT_RATE}/s): no lifecycle scenario in this run`;
  ctx.log(`  ${fmtRate(rate)} (${rateSource}), then ${fmtRate(rate / 2)}, against each of: ${Object.values(LABEL).join('; ')}`);
  const results: VariantResult[] = [];
  for (const variant of ['off', 'on', 'hang'] as const) results.push(await runVariant(ctx, variant, rate));
  return report(results, rate, rateSource, ctx.opts.sizes.mode !== 'smoke');
}

async function runVariant(ctx: BenchContext, variant: Variant, rate: number): Promise<VariantResult> {
  const z = ctx.opts.sizes.webhooks;
  let receiver: ListeningProcess | undefined;
  const prefix = `wh${variant}${ctx.tag}`;
  const env: Record<string, string> = { REDIS_PREFIX: prefix };
  if (variant !== 'off') {
    receiver = await startHelper(`webhook-receiver-${variant}`, 'bench/workers/webhookReceiver.ts', { MODE: variant === 'hang' ? 'hang' : 'ok' });
    env.WEBHOOKS = JSON.stringify([{ id: 'bench', url: `${receiver.url}/hooks`, secret: `whsec_${randomBytes(32).toString('base64')}` }]);
  }
  let deployment: Awaited<ReturnType<BenchContext['startDeployment']>>;
  try {
    deployment = await ctx.startDeployment(`webhooks-${variant}`, env);
  } catch (err) {
    await receiver?.stop();
    throw err;
  }
  try {
    return await ctx.asMain(deployment, async () => {
      const pool = await startCallsPool(ctx, z.pairsPerGenerator, 1);
      try {
        const p99LimitMs = ctx.opts.p99LimitMs;
        await runCallStep(ctx, pool, { label: 'warm-up', rate: Math.max(10, Math.round(rate / 4)), durationMs: z.warmupMs, p99LimitMs });
        ctx.log(`  ${LABEL[variant]}: ${fmtRate(rate)} for ${z.stepMs / 1000} s`);
        const sustained = await runCallStep(ctx, pool, { label: `${variant} sustained`, rate, durationMs: z.stepMs, p99LimitMs });
        ctx.log(`  ${LABEL[variant]}: ${fmtRate(sustained.achievedRate)}, errors ${errorList(sustained.errors)}, lifecycle p99 ${fmtMs(sustained.latency['lifecycle']?.p99 ?? NaN)}`);
        const half = await runCallStep(ctx, pool, { label: `${variant} half`, rate: rate / 2, durationMs: z.halfMs, p99LimitMs });
        ctx.log(`  ${LABEL[variant]} at ${fmtRate(rate / 2)}: answer → accepted p99 ${fmtMs(half.latency['answer → accepted (ws)']?.p99 ?? NaN)}`);
        const received = receiver ? ((await (await fetch(`${receiver.url}/count`)).json()) as { received: number }).received : 0;
        const result: VariantResult = { variant, sustained, half, received };
        if (variant === 'off') {
          // The key builder spells the pattern (a user id of `*`), never this file.
          const perUser = await ctx.keyMemory(keys.userHistoryIndex({ prefix, shards: 8 }, '*'));
          result.history = { perRecordBytes: perUser.bytes / Math.max(1, perUser.fields) };
        }
        return result;
      } finally {
        await pool.close();
      }
    });
  } finally {
    // Together with the receiver: each drains on SIGTERM, and the run's figures are taken.
    await Promise.all([...[deployment.worker, deployment.server].filter((p) => p !== undefined).map((p) => ctx.stopServer(p)), receiver?.stop()]);
  }
}

function report(results: readonly VariantResult[], rate: number, rateSource: string, atGoalSize: boolean): ScenarioResult {
  const by = Object.fromEntries(results.map((r) => [r.variant, r])) as Record<Variant, VariantResult>;
  const cpu = (s: StepResult, k: string) => s.cost.cpuMsPerLifecycle[k];
  const rows = results.map((r) => [
    LABEL[r.variant],
    fmtRate(r.sustained.achievedRate),
    errorList(r.sustained.errors),
    fmtMs(r.sustained.latency['lifecycle']?.p99 ?? NaN),
    ['server', 'server worker', 'redis'].map((k) => (cpu(r.sustained, k) === undefined ? '–' : `${cpu(r.sustained, k)!.toFixed(2)}`)).join(' / '),
    r.sustained.cost.redisCallsPerLifecycle.toFixed(1),
    fmtMs(r.half.latency['answer → accepted (ws)']?.p99 ?? NaN),
    r.variant === 'off' ? '–' : fmtNum(r.received),
  ]);
  const rateRatio = by.on.sustained.achievedRate / by.off.sustained.achievedRate;
  // Held: no errors, and every step's p99 under the limit, unless the step without webhooks missed
  // that too (a machine past its limit at this rate, whatever the webhooks do).
  const onHolds = Object.keys(by.on.sustained.errors).length === 0 && (by.on.sustained.pass || !by.off.sustained.pass);
  // What the cores allow: the rate is bounded by the CPU all server processes and Redis spend per
  // lifecycle (docs/performance.md "What bounds each"), so its ratio is the ratio of the costs.
  const serverCpu = (s: StepResult) => ['server', 'server worker', 'redis'].reduce((sum, k) => sum + (cpu(s, k) ?? 0), 0);
  const capacityRatio = serverCpu(by.off.sustained) / serverCpu(by.on.sustained);
  const hangP99 = by.hang.half.latency['answer → accepted (ws)']?.p99 ?? NaN;
  const offP99 = by.off.half.latency['answer → accepted (ws)']?.p99 ?? NaN;
  const hangRatio = hangP99 / offP99;
  const history = by.off.history;
  const goals: Goal[] = [
    {
      goal: 'sustained lifecycles/s with webhooks on ÷ off (same run)',
      target: `≥ ${GOAL_RATE_RATIO}×`,
      measured:
        `held ${rateRatio.toFixed(2)}× (${fmtRate(by.on.sustained.achievedRate)} ÷ ${fmtRate(by.off.sustained.achievedRate)})${onHolds ? '' : ', but the step with webhooks on did not pass'}` +
        `${by.off.sustained.pass ? '' : ' (no step kept every p99 under the limit, with or without webhooks)'}; ` +
        `the cores allow ${capacityRatio.toFixed(2)}× (server and Redis CPU per lifecycle ${serverCpu(by.off.sustained).toFixed(2)} ÷ ${serverCpu(by.on.sustained).toFixed(2)} ms)`,
      status: rateRatio >= GOAL_RATE_RATIO && capacityRatio >= GOAL_RATE_RATIO && onHolds ? 'MET' : 'MISSED',
      atGoalSize,
      note: `both at ${fmtRate(rate)} (${rateSource}): the rate with webhooks off, held with them on`,
    },
    {
      goal: 'answer → call.accepted p99 with a receiver that never answers ÷ without webhooks',
      target: `≤ ${GOAL_HANG_P99_RATIO}×`,
      measured: `${hangRatio.toFixed(2)}× (${fmtMs(hangP99)} ÷ ${fmtMs(offP99)})`,
      status: hangRatio <= GOAL_HANG_P99_RATIO ? 'MET' : 'MISSED',
      atGoalSize,
      note: `at ${fmtRate(rate / 2)}`,
    },
  ];
  const markdown = [
    `Three deployments of their own, one after the other, each at ${fmtRate(rate)} (${rateSource}) and then at half of it. ` +
      'CPU per lifecycle is of the deployment under test (server = api+gateway, worker, Redis); Redis commands per lifecycle include BullMQ\'s.',
    '',
    mdTable(['deployment', 'achieved', 'errors', 'lifecycle p99', 'CPU ms per lifecycle (server / worker / Redis)', 'Redis commands per lifecycle', `answer → accepted p99 at ${fmtRate(rate / 2)}`, 'webhooks received'], rows),
    '',
    history
      ? `Call history in Redis (docs/call-history.md), measured on the deployment without webhooks: ${fmtNum(history.perRecordBytes)} B per record in a user's history ` +
        `(two per call, one per party; a missed call is in the missed set too): about ${fmtNum(2 * history.perRecordBytes)} B per ended call for CALL_RECORD_RETENTION_DAYS.`
      : '',
  ].join('\n');
  // Each deployment's run at half the rate must be clean (a receiver that hangs must not hold calls
  // up), and the receiver of the deployment whose receiver answers must have received webhooks.
  const invalid = invalidReasons(
    allOf(
      ...results.map((r) => cleanStep(`${LABEL[r.variant]}, half the rate`, r.half)),
      { nonZero: [{ what: 'webhooks received (receiver answers 204)', n: by.on.received }, ...results.map((r) => ({ what: `${LABEL[r.variant]}: lifecycles/s`, n: r.sustained.achievedRate }))] },
    ),
  );
  return {
    invalid,
    id: 'webhooks',
    title: 'webhooks on the call path',
    headlines: [
      { metric: 'lifecycles/s, webhooks on ÷ off: held, and what the cores allow', value: `${rateRatio.toFixed(2)}×, ${capacityRatio.toFixed(2)}×` },
      { metric: 'answer → accepted p99, hanging receiver ÷ none', value: `${hangRatio.toFixed(2)}×` },
      ...(history ? [{ metric: 'call history per ended call (Redis)', value: `${fmtNum(2 * history.perRecordBytes)} B` }] : []),
    ],
    goals,
    markdown,
    data: { rate, rateSource, rateRatio, capacityRatio, results: results.map((r) => ({ variant: r.variant, received: r.received, history: r.history, sustained: r.sustained, half: r.half })) },
  };
}
