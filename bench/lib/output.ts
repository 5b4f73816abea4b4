import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import type { BenchContext } from './context.js';
import { REPO_ROOT } from './processes.js';
import { fmtBytes, mdTable, textTable, type ScenarioResult } from './report.js';
import { htmlReport } from './htmlReport.js';
import { recordFigures } from './figures.js';
import type { RunMeta } from './runMeta.js';
import { reasonsOf } from './validity.js';

/** The run's metadata, the terminal summary and the files under bench/results/. */


function sh(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
  } catch {
    return 'unknown';
  }
}

export async function collectMeta(ctx: BenchContext, durationS: number): Promise<RunMeta> {
  const dirty = sh('git', ['status', '--porcelain', '--', 'src', 'lua']) ? ' (src/ or lua/ modified)' : '';
  let redisVersion = 'unknown';
  try {
    const info = await ctx.redisInfoText();
    redisVersion = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
  } catch {
    /* keep unknown */
  }
  return {
    startedAt: new Date(ctx.startedAt).toISOString(),
    durationS,
    mode: ctx.opts.sizes.mode,
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    gitCommit: sh('git', ['rev-parse', '--short', 'HEAD']) + dirty,
    node: `bench ${process.version}; server processes ${ctx.serverRuntime() ?? 'not started by the bench'}`,
    redis: redisVersion,
    machine: `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${fmtBytes(totalmem())} RAM`,
    openFilesLimit: sh('sh', ['-c', 'ulimit -n']) + ' (soft) / ' + sh('sh', ['-c', 'ulimit -Hn']) + ' (hard)',
    generators: ctx.opts.generators,
    target: ctx.selfHosted ? 'self-hosted: this run started Redis and the servers' : `${ctx.opts.url} (Redis ${ctx.opts.redis})`,
    redisLaunch: ctx.selfHosted ? "own spawn of redis-server with --save '' --appendonly no --hz 100 (no persistence; startEmbeddedRedis would enable AOF)" : 'given',
    push: ctx.push.configured ? 'fake APNs (h2c) + fake FCM (test/support), in their own process' : `not measured: ${ctx.push.reason}`,
    topology: !ctx.selfHosted
      ? 'the target deployment'
      : ctx.opts.topology === 'split'
        ? 'split: two server processes, ROLES=api,gateway and ROLES=worker (relay, push, timers), as docker-compose.yml deploys them'
        : 'single: one server process with every role',
  };
}

/** VALID, or INVALID and why, per scenario (bench/lib/validity.ts). */
export function validityRows(results: readonly ScenarioResult[]): [string, string, string][] {
  return results.map((r) => {
    const reasons = reasonsOf(r);
    return [r.id, reasons.length ? 'INVALID' : 'valid', reasons.join('; ')];
  });
}

/** A goal's status as the report prints it. */
export const statusText = (status: string, mode: string): string => (status === 'NOT JUDGED' ? `not judged at ${mode} size` : status);

export function printSummary(results: readonly ScenarioResult[], log: (s: string) => void, mode = 'quick'): void {
  log('\n' + textTable(['scenario', 'validity', 'why'], validityRows(results), 100));
  const rows: string[][] = [];
  for (const r of results) {
    if (r.error) rows.push([r.id, 'FAILED TO RUN', r.error.split('\n')[0]!, '', '']);
    for (const h of r.headlines) rows.push([r.id, h.metric, h.value, h.ceiling ?? '', h.ratio ?? '']);
  }
  log('\n' + textTable(['scenario', 'metric', 'value', 'ceiling (this run)', 'ratio'], rows, 56));
  const goals = results.flatMap((r) => r.goals);
  if (goals.length) {
    log('\n' + textTable(['goal', 'measured', 'status', 'at goal size'], goals.map((g) => [g.goal, g.measured, statusText(g.status, mode), g.atGoalSize ? 'yes' : 'no']), 70));
  }
  const bounds = results.flatMap((r) => r.headlines.filter((h) => h.bound).map((h) => `  ${r.id} / ${h.metric}: ${h.bound}`));
  if (bounds.length) log('\nWhat bounds each result:\n' + bounds.join('\n'));
}

/** Writes `<time>.json`, `<time>.md` and `<time>.html`, and copies the last two to `latest.*`. */
export function writeResults(meta: RunMeta, results: readonly ScenarioResult[], ceilings: unknown, outDir?: string): { json: string; md: string; html: string; latest: string } {
  const dir = outDir ?? join(REPO_ROOT, 'bench/results');
  mkdirSync(dir, { recursive: true });
  const stamp = meta.startedAt.replace(/[:.]/g, '-');
  const json = join(dir, `${stamp}.json`);
  const md = join(dir, `${stamp}.md`);
  const html = join(dir, `${stamp}.html`);
  const latest = join(dir, 'latest.md');
  writeFileSync(json, JSON.stringify({ meta, ceilings, results }, null, 2));
  const text = markdown(meta, results);
  writeFileSync(md, text);
  writeFileSync(latest, text);
  recordFigures(meta, results, md); // bench/results/figures.json: the figures this run measured (docs/performance.md)
  const page = htmlReport({ meta, results });
  writeFileSync(html, page);
  writeFileSync(join(dir, 'latest.html'), page);
  return { json, md, html, latest };
}

function markdown(meta: RunMeta, results: readonly ScenarioResult[]): string {
  const goals = results.flatMap((r) => r.goals);
  const out: string[] = [
    `# Bench report — ${meta.startedAt} (${meta.mode})`,
    '',
    'Every figure below was measured in this run; ceilings are measured in the same run, on the same machine, and every ratio is computed from them.',
    meta.mode !== 'full' ? `**${meta.mode === 'smoke' ? 'Smoke' : 'Quick'} mode**: sizes and durations are reduced (see "at goal size"; a goal missed below its size is "not judged at ${meta.mode} size"); run \`npm run bench -- --full\` for the goal sizes.${meta.mode === 'smoke' ? ' A smoke run checks that every scenario runs and counts what it must: its figures mean nothing.' : ''}` : '',
    '',
    results.some((r) => reasonsOf(r).length > 0)
      ? `**INVALID scenarios in this run: ${results.filter((r) => reasonsOf(r).length > 0).map((r) => r.id).join(', ')}.** Their figures are a breakage (errors, or a count impossible for what the scenario did), not a measurement: see "Validity".`
      : '',
    '',
    mdTable(
      ['', ''],
      [
        ['command', `\`${meta.command}\``],
        ['duration', `${meta.durationS.toFixed(0)} s`],
        ['commit', meta.gitCommit],
        ['machine', meta.machine],
        ['Node.js', meta.node],
        ['Redis', `${meta.redis}; ${meta.redisLaunch}`],
        ['open files limit', meta.openFilesLimit],
        ['load generators', `${meta.generators} process(es)`],
        ['target', meta.target],
        ['push', meta.push],
        ['server topology', meta.topology],
      ],
    ),
    '',
    '## Validity',
    '',
    'A scenario is INVALID when it failed to run, counted errors in a run meant to be within capacity, or measured a count impossible for what it did (0 pending where calls were created, 0 expiries where calls rang out, 0 throughput); the run then exits non-zero (bench/README.md "Valid and INVALID runs").',
    '',
    mdTable(['scenario', 'validity', 'why'], validityRows(results).map(([id, v, why]) => [id, v === 'INVALID' ? '**INVALID**' : v, why])),
    '',
    '## Summary',
    '',
    mdTable(
      ['scenario', 'metric', 'value', 'ceiling (this run)', 'ratio'],
      results.flatMap((r) => [
        ...(r.error ? [[r.id, 'FAILED TO RUN', r.error.split('\n')[0]!, '', '']] : []),
        ...r.headlines.map((h) => [reasonsOf(r).length ? `${r.id} (INVALID)` : r.id, h.metric, h.value, h.ceiling ?? '', h.ratio ?? '']),
      ]),
    ),
    '',
    '## Goals',
    '',
    mdTable(
      ['goal', 'target', 'measured', 'status', 'at goal size', 'what bounds it'],
      goals.map((g) => [g.goal, g.target, g.measured, `**${statusText(g.status, meta.mode)}**`, g.atGoalSize ? 'yes' : 'no', g.note]),
    ),
    '',
    '## What bounds each result',
    '',
    ...results.flatMap((r) => r.headlines.filter((h) => h.bound).map((h) => `- **${r.id} / ${h.metric}**: ${h.bound}`)),
    '',
  ];
  for (const r of results) {
    out.push(`## ${r.title}${reasonsOf(r).length ? ' — INVALID' : ''}`, '');
    if (reasonsOf(r).length) out.push(`**INVALID**: ${reasonsOf(r).join('; ')}.`, '');
    if (r.error) out.push('```', r.error, '```', '');
    out.push(r.markdown, '');
  }
  return out.filter((l, i, a) => !(l === '' && a[i - 1] === '')).join('\n');
}
