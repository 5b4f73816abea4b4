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

export function printSummary(results: readonly ScenarioResult[], log: (s: string) => void): void {
  const rows: string[][] = [];
  for (const r of results) {
    if (r.error) rows.push([r.id, 'FAILED TO RUN', r.error.split('\n')[0]!, '', '']);
    for (const h of r.headlines) rows.push([r.id, h.metric, h.value, h.ceiling ?? '', h.ratio ?? '']);
  }
  log('\n' + textTable(['scenario', 'metric', 'value', 'ceiling (this run)', 'ratio'], rows, 56));
  const goals = results.flatMap((r) => r.goals);
  if (goals.length) {
    log('\n' + textTable(['goal', 'measured', 'status', 'at goal size'], goals.map((g) => [g.goal, g.measured, g.status, g.atGoalSize ? 'yes' : 'no']), 70));
  }
  const bounds = results.flatMap((r) => r.headlines.filter((h) => h.bound).map((h) => `  ${r.id} / ${h.metric}: ${h.bound}`));
  if (bounds.length) log('\nWhat bounds each result:\n' + bounds.join('\n'));
}

/** Writes `<time>.json`, `<time>.md` and `<time>.html`, and copies the last two to `latest.*`. */
export function writeResults(meta: RunMeta, results: readonly ScenarioResult[], ceilings: unknown): { json: string; md: string; html: string; latest: string } {
  const dir = join(REPO_ROOT, 'bench/results');
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
    meta.mode === 'quick' ? '**Quick mode**: sizes and durations are reduced (see "at goal size"); run `npm run bench -- --full` for the goal sizes.' : '',
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
    '## Summary',
    '',
    mdTable(
      ['scenario', 'metric', 'value', 'ceiling (this run)', 'ratio'],
      results.flatMap((r) => [
        ...(r.error ? [[r.id, 'FAILED TO RUN', r.error.split('\n')[0]!, '', '']] : []),
        ...r.headlines.map((h) => [r.id, h.metric, h.value, h.ceiling ?? '', h.ratio ?? '']),
      ]),
    ),
    '',
    '## Goals',
    '',
    mdTable(
      ['goal', 'target', 'measured', 'status', 'at goal size', 'what bounds it'],
      goals.map((g) => [g.goal, g.target, g.measured, `**${g.status}**`, g.atGoalSize ? 'yes' : 'no', g.note]),
    ),
    '',
    '## What bounds each result',
    '',
    ...results.flatMap((r) => r.headlines.filter((h) => h.bound).map((h) => `- **${r.id} / ${h.metric}**: ${h.bound}`)),
    '',
  ];
  for (const r of results) {
    out.push(`## ${r.title}`, '');
    if (r.error) out.push('```', r.error, '```', '');
    out.push(r.markdown, '');
  }
  return out.filter((l, i, a) => !(l === '' && a[i - 1] === '')).join('\n');
}
