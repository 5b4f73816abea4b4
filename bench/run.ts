import { BenchContext } from './lib/context.js';
import { parseArgs, type ScenarioId, type Sizes } from './lib/args.js';
import { collectMeta, printSummary, writeResults } from './lib/output.js';
import { profilesSection } from './lib/profile.js';
import type { ScenarioResult } from './lib/report.js';
import { microScenario } from './scenarios/micro.js';
import { ceilingsScenario } from './scenarios/ceilings.js';
import { lifecycleScenario } from './scenarios/lifecycle.js';
import { stormScenario } from './scenarios/storm.js';
import { groupScenario } from './scenarios/group.js';
import { idleScenario } from './scenarios/idle.js';
import { timersScenario } from './scenarios/timers.js';
import { compareScenario } from './scenarios/compare.js';
import { soakScenario } from './scenarios/soak.js';
import { webhooksScenario } from './scenarios/webhooks.js';
import { compareRefScenario } from './scenarios/compareRef.js';
import { reconnectScenario } from './scenarios/reconnect.js';
import { combineRuns } from './lib/repeat.js';
import { isInvalid, reasonsOf } from './lib/validity.js';
import { judgeGoals } from './lib/report.js';
import { runTag } from './lib/users.js';

/**
 * `npm run bench -- [--quick | --full] [...]`: starts its own Redis and server (or targets
 * --url/--redis), measures the limits of this machine (Redis-bound and raw uWS ceilings), runs
 * the scenarios, prints progress and a table, and writes bench/results/<time>.json, <time>.md,
 * <time>.html (charts), and bench/results/latest.md and latest.html. See bench/README.md.
 */

const SCENARIOS: Record<ScenarioId, { title: string; run: (ctx: BenchContext) => Promise<ScenarioResult> }> = {
  micro: { title: 'microbenchmarks', run: microScenario },
  ceilings: { title: 'ceilings (Redis-bound, raw uWS HTTP)', run: ceilingsScenario },
  lifecycle: { title: 'full lifecycle, open loop', run: lifecycleScenario },
  webhooks: { title: 'webhooks on the call path', run: webhooksScenario },
  storm: { title: 'answer storms', run: stormScenario },
  group: { title: 'group calls', run: groupScenario },
  idle: { title: 'idle connections', run: idleScenario },
  timers: { title: 'ring timers', run: timersScenario },
  compare: { title: 'in-call messages vs Socket.IO', run: compareScenario },
  reconnect: { title: 'reconnect storm: a gateway killed', run: reconnectScenario },
  soak: { title: 'soak: memory and keys over a long run', run: soakScenario },
  compareRef: { title: 'two builds compared at one fixed rate', run: compareRefScenario },
};
/** Ceilings first: every other scenario's ratios need them. */
const ORDER: ScenarioId[] = ['micro', 'ceilings', 'lifecycle', 'webhooks', 'storm', 'group', 'timers', 'idle', 'compare', 'reconnect', 'soak', 'compareRef'];

/**
 * The group scenario's search, sustained runs (with their retries and the run halfway back) and half-rate run, each with
 * time to settle, and its set-up: a quick run's can exceed the 90 s of the other scenarios.
 */
function groupWatchdogMs(z: Sizes['group']): number {
  return z.warmupMs + (z.maxSteps + z.bisections) * (z.stepMs + 20_000) + 5 * (z.sustainedMs + 20_000) + z.halfMs + z.saturatedMs + 50_000 + 120_000;
}

/**
 * A smoke run's scenarios are tiny but share the machine with the rest of `npm test` (three bench
 * runs at once beside browsers and Redis Clusters): the ceilings scenario once took over 90 s, the
 * webhooks scenario over its 127 s. Each gets at least this long.
 */
const SMOKE_WATCHDOG_MS = 300_000;

async function main(): Promise<void> {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(2);
  }
  const t0 = performance.now();
  const ctx = new BenchContext(opts);
  ctx.log(`bench: ${opts.sizes.mode} mode, scenarios ${opts.scenarios.join(', ')}, ${opts.generators} generator process(es)`);
  const results: ScenarioResult[] = [];
  try {
    await ctx.start();
    for (const id of ORDER.filter((s) => opts.scenarios.includes(s))) {
      // The soak runs as long as it is told; webhooks runs three deployments one after the other;
      // lifecycle --over both runs two searches. Every other scenario is bounded by the mode.
      const boundMs =
        id === 'soak' ? opts.sizes.soak.durationMs + 300_000
        : id === 'webhooks' ? 3 * (opts.sizes.webhooks.warmupMs + opts.sizes.webhooks.stepMs + opts.sizes.webhooks.halfMs) + 120_000
        : id === 'compareRef' ? 2 * opts.sizes.compareRef.runs * (opts.sizes.compareRef.warmupMs + opts.sizes.compareRef.stepMs + 60_000) + 120_000
        : id === 'group' ? groupWatchdogMs(opts.sizes.group)
        : (opts.sizes.mode === 'full' ? 30 * 60_000 : 90_000) * (id === 'lifecycle' && opts.over === 'both' ? 2 : id === 'compare' ? Math.max(1, opts.sizes.compare.repeats) : 1);
      const watchdogMs = opts.sizes.mode === 'smoke' ? Math.max(boundMs, SMOKE_WATCHDOG_MS) : boundMs;
      const s = SCENARIOS[id];
      const ts = performance.now();
      ctx.log(`\n== ${s.title} ==`);
      const runs: ScenarioResult[] = [];
      for (let n = 1; n <= opts.repeat; n++) {
        if (opts.repeat > 1) ctx.log(`  -- run ${n} of ${opts.repeat}`);
        // Each run its own users, call IDs and key prefixes: a scenario run again must not meet its first run's calls.
        if (n > 1) ctx.tag = runTag();
        let timer: NodeJS.Timeout | undefined;
        try {
          const r = await Promise.race([
            s.run(ctx),
            new Promise<never>((_, rej) => (timer = setTimeout(() => rej(new Error(`scenario did not finish within ${watchdogMs / 1000} s`)), watchdogMs))),
          ]);
          runs.push(r);
          for (const h of r.headlines) ctx.log(`  => ${h.metric}: ${h.value}${h.ratio ? ` (${h.ratio} of ${h.ceiling})` : ''}`);
        } catch (err) {
          const message = err instanceof Error ? (err.stack ?? err.message) : String(err);
          ctx.log(`  !! ${id} failed: ${message.split('\n')[0]}`);
          runs.push({ id, title: s.title, headlines: [], goals: [], markdown: 'This scenario failed to run in this run (error above).', data: null, error: message });
        } finally {
          clearTimeout(timer);
        }
      }
      const r = judgeGoals(combineRuns(runs), opts.sizes.mode);
      results.push(r);
      const reasons = reasonsOf(r);
      if (reasons.length) ctx.log(`  !! ${id} INVALID: ${reasons.join('; ')}`);
      ctx.log(`  (${((performance.now() - ts) / 1000).toFixed(1)} s)`);
    }
  } finally {
    const durationS = (performance.now() - t0) / 1000;
    const meta = await collectMeta(ctx, durationS).catch(() => undefined);
    await ctx.close();
    if (ctx.profileDir) {
      // The servers write their profiles when they exit (above).
      const prof = profilesSection(ctx.profileDir, ctx.startedAt);
      results.push({ id: 'profiles', title: 'CPU profiles of the server processes (--cpu-prof)', headlines: [], goals: [], markdown: prof.markdown, data: prof.data });
    }
    if (meta) {
      printSummary(results, (l) => ctx.log(l), opts.sizes.mode);
      const files = writeResults(meta, results, ctx.ceilings, opts.out);
      ctx.log(`\nwrote ${files.json}\n      ${files.md}\n      ${files.html}\n      ${files.latest} (and latest.html)`);
      ctx.log(`total ${durationS.toFixed(1)} s`);
    }
  }
  // A run with an INVALID scenario (bench/lib/validity.ts) is no measurement: it fails.
  process.exit(results.some(isInvalid) ? 1 : 0);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
