import { randomBytes } from 'node:crypto';
import type { BenchContext } from '../lib/context.js';
import { startHelper, type ListeningProcess } from '../lib/processes.js';
import { checkOut, thisBuild } from '../lib/otherBuild.js';
import { errorList, fmtPct, fmtRate, mdTable, type ScenarioResult } from '../lib/report.js';
import { runCallStep, startCallsPool, type StepResult } from './callSteps.js';
import { spreadOf, verdict, type Spread } from '../lib/spread.js';

/**
 * Two builds side by side (`--compare-ref <git ref>`; bench/README.md, "Comparing two builds"):
 * this checkout and the ref, checked out into a temporary worktree, each as a deployment of its
 * own (api+gateway and worker, every feature on: one webhook endpoint) on the bench's Redis with
 * a key prefix of its own, run at the same fixed offered rate, well under either's limit,
 * alternately several times in one run (this, ref, ref, this, …, so a drift of the machine
 * weighs on both alike). Each run reports what one lifecycle cost: CPU per process and Redis
 * commands. The report gives each figure's median and spread over the runs, the ratio of the
 * medians, and whether the runs allow a conclusion: only when every run of one build is below
 * every run of the other. A run during which processes this bench did not start used CPU is
 * DISTURBED, and the report says so.
 */

type Build = 'this' | 'ref';

/** The figures compared: CPU ms per lifecycle by process (server = api+gateway), and Redis commands. */
const FIGURES = [
  { key: 'server', label: 'api+gateway CPU ms per lifecycle' },
  { key: 'server worker', label: 'worker CPU ms per lifecycle' },
  { key: 'server total', label: 'server CPU ms per lifecycle (both processes)' },
  { key: 'redis', label: 'Redis CPU ms per lifecycle' },
  { key: 'commands', label: 'Redis commands per lifecycle' },
] as const;
type Figure = (typeof FIGURES)[number]['key'];

/** Another process using this much of a core during a run disturbs it (as callSteps.describeBound says). */
const DISTURBED_CORES = 0.2;
/**
 * A run that achieved less than this share of the offered rate, or had errors, was not at the
 * same rate as the others (a build past its limit on this machine, or a machine too busy): its
 * per-lifecycle figures carry a backlog and failed lifecycles, and no conclusion is drawn.
 */
const HELD_SHARE = 0.95;

interface RunResult {
  build: Build;
  round: number;
  achievedRate: number;
  /** Held the offered rate: no errors, and at least HELD_SHARE of it achieved. */
  held: boolean;
  errors: Record<string, number>;
  figures: Record<Figure, number>;
  /** Redis commands per lifecycle by name (INFO commandstats, inside scripts too). */
  byCommand: Record<string, number>;
  otherCores: number;
  disturbed: boolean;
}

export async function compareRefScenario(ctx: BenchContext): Promise<ScenarioResult> {
  const z = ctx.opts.sizes.compareRef;
  const ref = ctx.opts.compareRef;
  if (!ref) throw new Error('compareRef needs --compare-ref <git ref>');
  if (!ctx.selfHosted) throw new Error('--compare-ref starts deployments of its own: not with --url');
  const self = thisBuild();
  const other = checkOut(ref, (l) => ctx.log(l));
  ctx.log(`  this checkout ${self.commit.slice(0, 9)}${self.dirty ? ' (with changes not committed)' : ''} against ${ref} = ${other.commit.slice(0, 9)} (${other.root}; dependencies ${other.dependencies})`);
  ctx.log(`  ${z.runs} rounds at ${fmtRate(z.rate)}: ${z.warmupMs / 1000} s warm-up and ${z.stepMs / 1000} s measured per run`);
  const receiver = await startHelper('webhook-receiver-compare', 'bench/workers/webhookReceiver.ts', { MODE: 'ok' });
  const runs: RunResult[] = [];
  try {
    for (let round = 0; round < z.runs; round++) {
      // this, ref, then ref, this: each build goes first as often as the other.
      const order: Build[] = round % 2 === 0 ? ['this', 'ref'] : ['ref', 'this'];
      for (const build of order) {
        const r = await runOnce(ctx, build, round, build === 'ref' ? other.root : undefined, receiver);
        runs.push(r);
        ctx.log(
          `  round ${round + 1} ${build}: ${fmtRate(r.achievedRate)}, errors ${errorList(r.errors)}, server ${r.figures['server total'].toFixed(3)} ms, ` +
            `redis ${r.figures.redis.toFixed(3)} ms, ${r.figures.commands.toFixed(1)} commands per lifecycle${r.disturbed ? `; DISTURBED (${fmtPct(r.otherCores)} of a core)` : ''}`,
        );
      }
    }
  } finally {
    await receiver.stop();
    other.remove();
  }
  return report(runs, { ref, refCommit: other.commit, commit: self.commit, dirty: self.dirty, rate: z.rate, stepMs: z.stepMs });
}

async function runOnce(ctx: BenchContext, build: Build, round: number, root: string | undefined, receiver: ListeningProcess): Promise<RunResult> {
  const z = ctx.opts.sizes.compareRef;
  const env = {
    REDIS_PREFIX: `cmp${build}${round}${ctx.tag}`,
    WEBHOOKS: JSON.stringify([{ id: 'bench', url: `${receiver.url}/hooks`, secret: `whsec_${randomBytes(32).toString('base64')}` }]),
  };
  const deployment = await ctx.startDeployment(`compare-${build}-${round + 1}`, env, root);
  try {
    return await ctx.asMain(deployment, async () => {
      const pool = await startCallsPool(ctx, z.pairsPerGenerator, 1);
      try {
        const p99LimitMs = ctx.opts.p99LimitMs;
        await runCallStep(ctx, pool, { label: `${build} warm-up`, rate: z.rate, durationMs: z.warmupMs, p99LimitMs });
        const s = await runCallStep(ctx, pool, { label: `${build} round ${round + 1}`, rate: z.rate, durationMs: z.stepMs, p99LimitMs });
        const held = Object.keys(s.errors).length === 0 && s.achievedRate >= HELD_SHARE * z.rate;
        return { build, round, achievedRate: s.achievedRate, held, errors: s.errors, figures: figuresOf(s), byCommand: s.cost.redisCommandsPerLifecycle, otherCores: s.cpu.otherCores, disturbed: s.cpu.otherCores > DISTURBED_CORES };
      } finally {
        await pool.close();
      }
    });
  } finally {
    for (const p of [deployment.worker, deployment.server]) if (p) await ctx.stopServer(p);
  }
}

function figuresOf(s: StepResult): Record<Figure, number> {
  const cpu = (k: string) => s.cost.cpuMsPerLifecycle[k] ?? NaN;
  return {
    server: cpu('server'),
    'server worker': cpu('server worker'),
    'server total': cpu('server') + (s.cost.cpuMsPerLifecycle['server worker'] ?? 0),
    redis: cpu('redis'),
    commands: s.cost.redisCallsPerLifecycle,
  };
}

/** Each command's median per lifecycle for both builds, the largest (of either) first; those under 0.5 in both left out. */
function commandRows(runs: RunResult[]): string[][] {
  const names = new Set(runs.flatMap((r) => Object.keys(r.byCommand)));
  const median = (build: Build, name: string) => spreadOf(runs.filter((r) => r.build === build).map((r) => r.byCommand[name] ?? 0)).median;
  return [...names]
    .map((name) => [name, median('this', name), median('ref', name)] as const)
    .filter(([, a, b]) => Math.max(a, b) >= 0.5)
    .sort((x, y) => Math.max(y[1], y[2]) - Math.max(x[1], x[2]))
    .map(([name, a, b]) => [name, a.toFixed(1), b.toFixed(1)]);
}

function report(runs: RunResult[], m: { ref: string; refCommit: string; commit: string; dirty: boolean; rate: number; stepMs: number }): ScenarioResult {
  const of = (build: Build, f: Figure) => spreadOf(runs.filter((r) => r.build === build).map((r) => r.figures[f]));
  const fmt = (s: Spread, digits: number) => `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)}, ±${((s.relative * 100) / 2).toFixed(0)} %)`;
  const underRate = runs.filter((r) => !r.held);
  const rows = FIGURES.map(({ key, label }) => {
    const a = of('this', key);
    const b = of('ref', key);
    const digits = key === 'commands' ? 1 : 3;
    const v = verdict(a, b);
    const conclusion = underRate.length > 0 ? 'no: not every run held the rate' : v === 'inconclusive' ? 'no: the runs overlap' : `yes: this build is ${v}`;
    return [label, fmt(a, digits), fmt(b, digits), `${(a.median / b.median).toFixed(2)}×`, conclusion];
  });
  const disturbed = runs.filter((r) => r.disturbed);
  const errors = runs.filter((r) => Object.keys(r.errors).length > 0);
  const thisName = `this checkout (${m.commit.slice(0, 9)}${m.dirty ? ' + changes' : ''})`;
  const refName = `${m.ref} (${m.refCommit.slice(0, 9)})`;
  const markdown = [
    `${thisName} against ${refName}, each a deployment of its own (api+gateway and worker; webhooks on, one endpoint), ` +
      `at ${fmtRate(m.rate)} offered, ${runs.length / 2} runs each of ${m.stepMs / 1000} s, alternated. Median (lowest–highest, ± half the range as a share of the median):`,
    '',
    mdTable(['figure', thisName, refName, 'ratio of medians', 'conclusive?'], rows),
    '',
    mdTable(
      ['run', 'build', 'achieved', 'errors', 'server CPU ms', 'Redis CPU ms', 'commands', 'others on the machine'],
      runs.map((r, i) => [
        String(i + 1),
        r.build,
        `${fmtRate(r.achievedRate)}${r.held ? '' : ' UNDER RATE'}`,
        errorList(r.errors),
        r.figures['server total'].toFixed(3),
        r.figures.redis.toFixed(3),
        r.figures.commands.toFixed(1),
        `${fmtPct(r.otherCores)} of a core${r.disturbed ? ' DISTURBED' : ''}`,
      ]),
    ),
    '',
    'Redis commands per lifecycle by name, median of the runs (the largest first):',
    '',
    mdTable(['command', thisName, refName], commandRows(runs)),
    '',
    disturbed.length > 0
      ? `**DISTURBED**: in ${disturbed.length} of ${runs.length} runs processes this bench did not start used up to ${fmtPct(Math.max(...disturbed.map((r) => r.otherCores)))} of a core; their figures are not a reference.`
      : 'Not disturbed: no process this bench did not start used more than a fifth of a core in any run.',
    errors.length > 0 ? `Runs with errors: ${errors.map((r) => `${r.build} round ${r.round + 1} (${errorList(r.errors)})`).join('; ')}.` : '',
    underRate.length > 0
      ? `**Not at one rate**: ${underRate.length} of ${runs.length} runs did not hold ${fmtRate(m.rate)} (errors, or under ${HELD_SHARE * 100} % of it achieved): a build past its limit here, or a machine too busy. Run again, at a lower rate (--set compareRef.rate=N).`
      : '',
  ].join('\n');
  return {
    id: 'compareRef',
    title: `this checkout against ${m.ref}`,
    headlines: FIGURES.map(({ label }, i) => ({ metric: label, value: `${rows[i]![1]} vs ${rows[i]![2]}: ${rows[i]![3]}${disturbed.length > 0 ? ' (DISTURBED)' : ''}` })),
    goals: [],
    markdown,
    data: { ...m, runs },
  };
}
