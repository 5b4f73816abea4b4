import { isInvalid } from './validity.js';
import { readFileSync, writeFileSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ScenarioResult } from './report.js';
import type { RunMeta } from './runMeta.js';

/**
 * The current figures: bench/results/figures.json, one committed file that the README's and
 * docs/performance.md's headline tables are generated from (`npm run docs`, scripts/docPages.ts).
 * Each figure keeps its value, unit, the date and commit of the run that measured it and that
 * run's report. A bench run updates the figures it measured (recordFigures, called when it writes
 * its report); the label and what bounds a figure are written by hand and kept. Commit the report
 * a figure points to with the file, and run `npm run docs`.
 */

export const FIGURES_FILE = 'bench/results/figures.json';

const root = fileURLToPath(new URL('../../', import.meta.url));

export interface Figure {
  /** Stable name, e.g. `lifecycle.sustained`. */
  id: string;
  /** What it is, as the tables show it. */
  label: string;
  value: number;
  /** `/s`, `ms`, `×`, `B`, or '' for a count. */
  unit: string;
  /** The run's day (UTC), YYYY-MM-DD. */
  date: string;
  /** The commit the run measured. */
  commit: string;
  /** The run's report, repository-relative (bench/results/…md). */
  report: string;
  /** The run's command. */
  command: string;
  /** In the README's table too. */
  headline?: boolean;
  /** A figure no bench scenario writes (recorded by hand from its report). */
  byHand?: boolean;
}

export interface FiguresFile {
  figures: Figure[];
}

export function readFigures(read: (path: string) => string = (p) => readFileSync(`${root}${p}`, 'utf8')): FiguresFile {
  return JSON.parse(read(FIGURES_FILE)) as FiguresFile;
}

/** The first number of a text (`1,425/s for 6 s` → 1425); with `nth`, the nth. */
function num(text: string | undefined, nth = 0): number | undefined {
  const all = [...(text ?? '').replace(/(\d),(?=\d{3}\b)/g, '$1').matchAll(/-?\d+(?:\.\d+)?/g)].map((m) => Number(m[0]));
  return all[nth];
}

/** The ratio a headline states (`0.45×`), from its ratio column or, failing that, its value. */
function ratio(value: string, r: string | undefined): number | undefined {
  const m = /(\d+(?:\.\d+)?)×/.exec(r ?? '') ?? /(\d+(?:\.\d+)?)×/.exec(value);
  return m ? Number(m[1]) : undefined;
}

/** Which headline of which scenario each figure is read from, and how. */
const SOURCES: { id: string; scenario: string; metric: RegExp; pick: (value: string, r: string | undefined) => number | undefined }[] = [
  { id: 'lifecycle.sustained', scenario: 'lifecycle', metric: /^sustained lifecycles\/s \(/, pick: (v) => num(v) },
  { id: 'lifecycle.machineBoundRatio', scenario: 'lifecycle', metric: /^sustained ÷ machine-bound rate/, pick: (v) => num(v) },
  { id: 'lifecycle.framesRatio', scenario: 'lifecycle', metric: /^sustained lifecycles\/s, answer and end as socket frames/, pick: ratio },
  { id: 'lifecycle.answerP99', scenario: 'lifecycle', metric: /^answer \(as a frame\) → call\.accepted p99 at half/, pick: (v) => num(v) },
  { id: 'lifecycle.redisCommands', scenario: 'compareRef', metric: /^Redis commands per lifecycle/, pick: (v) => num(v) },
  { id: 'lifecycle.serverCpu', scenario: 'compareRef', metric: /^server CPU ms per lifecycle/, pick: (v) => num(v) },
  { id: 'lifecycle.redisCpu', scenario: 'compareRef', metric: /^Redis CPU ms per lifecycle/, pick: (v) => num(v) },
  { id: 'compare.messagesSaturated', scenario: 'compare', metric: /^in-call messages\/s socket → socket \(saturated\)/, pick: ratio },
  { id: 'compare.messagesP99', scenario: 'compare', metric: /^message p99 at /, pick: ratio },
  { id: 'timers.unansweredP99', scenario: 'timers', metric: /^unanswered lateness p99/, pick: (v) => num(v) },
  { id: 'idle.bytesPerSocket', scenario: 'idle', metric: /^server memory per idle socket/, pick: (v) => num(v) },
  { id: 'webhooks.heldRatio', scenario: 'webhooks', metric: /^lifecycles\/s, webhooks on ÷ off/, pick: (v) => num(v) },
  { id: 'webhooks.hangingP99Ratio', scenario: 'webhooks', metric: /^answer → accepted p99, hanging receiver/, pick: (v) => num(v) },
  { id: 'history.bytesPerCall', scenario: 'webhooks', metric: /^call history per ended call/, pick: (v) => num(v) },
  { id: 'soak.p99Drift', scenario: 'soak', metric: /^soak answered p99, last vs first/, pick: ratio },
  { id: 'group.sustained', scenario: 'group', metric: /^sustained group calls\/s/, pick: (v) => num(v) },
  { id: 'group.fanoutP99', scenario: 'group', metric: /^invitation fan-out to the last socket p99/, pick: (v) => num(v, 0) },
  { id: 'group.joinP99', scenario: 'group', metric: /^invitation fan-out to the last socket p99/, pick: (v) => num(v, 1) },
  { id: 'group.commandsRatio', scenario: 'group', metric: /^Redis commands per member/, pick: (_v, r) => ratio('', r) },
  { id: 'group.roundTripsRatio', scenario: 'group', metric: /^Redis round trips per member/, pick: (_v, r) => ratio('', r) },
  { id: 'group.cpuRatio', scenario: 'group', metric: /^CPU ms \(server processes and Redis\) per member/, pick: (_v, r) => ratio('', r) },
];

/** The figures of `file` that this run measured, updated; the others as they were. */
export function updatedFigures(file: FiguresFile, meta: RunMeta, results: readonly ScenarioResult[], report: string): FiguresFile {
  // Only a run of this checkout against its own one Redis stands for the figures (a cluster run,
  // or a run against a deployment, measures something else).
  if (/cluster/i.test(`${meta.topology} ${meta.redis}`) || !/^self-hosted/.test(meta.target)) return file;
  const figures = file.figures.map((f) => {
    const source = SOURCES.find((s) => s.id === f.id);
    const result = source && results.find((r) => r.id === source.scenario && !r.error);
    const headline = result?.headlines.find((h) => source!.metric.test(h.metric));
    if (!headline || /DISTURBED|not run|FAILED/i.test(headline.value)) return f;
    const value = source!.pick(headline.value, headline.ratio);
    if (value === undefined || !Number.isFinite(value)) return f;
    return { ...f, value, date: meta.startedAt.slice(0, 10), commit: meta.gitCommit.split(' ')[0]!, report, command: meta.command };
  });
  return { ...file, figures };
}

/** Whether a run may update the figures (recordFigures). */
export function standsForFigures(meta: Pick<RunMeta, 'mode'>, results: readonly ScenarioResult[], report: string): boolean {
  return meta.mode !== 'smoke' && report.startsWith('bench/results/') && !results.some(isInvalid);
}

/** Writes the figures this run measured into bench/results/figures.json (bench/lib/output.ts calls it with the run's Markdown report). */
export function recordFigures(meta: RunMeta, results: readonly ScenarioResult[], reportPath: string): void {
  const report = relative(root, reportPath);
  // Only a report this repository keeps (bench/results), at a size whose figures mean something,
  // from a valid run: a smoke run (the CI test), a run written elsewhere (--out) or an INVALID one
  // leaves the figures as they are.
  if (!standsForFigures(meta, results, report)) return;
  const next = updatedFigures(readFigures(), meta, results, report);
  writeFileSync(`${root}${FIGURES_FILE}`, `${JSON.stringify(next, null, 2)}\n`);
}

/** A figure's value as the tables show it: `1,425/s`, `3.38 ms`, `0.45×`, `902 B`, `55.4`. */
export function shown(f: Pick<Figure, 'value' | 'unit'>): string {
  const digits = f.value >= 100 || Number.isInteger(f.value) ? 0 : f.value >= 10 ? 1 : 2;
  const n = f.value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  if (f.unit === '/s' || f.unit === '×') return `${n}${f.unit}`;
  return f.unit ? `${n} ${f.unit}` : n;
}

/** The run column: the day and commit, linking the report (paths relative to the page at `page`). */
function run(f: Figure, page: string): string {
  const up = page.includes('/') ? '../' : '';
  return `[${f.date}, ${f.commit}](${up}${f.report})`;
}

/** docs/performance.md "Current figures": every figure. */
export function figuresTable(file: FiguresFile, page = 'docs/performance.md'): string {
  return ['| measure | figure | run (its report) |', '|---|---|---|', ...file.figures.map((f) => `| ${f.label} | ${shown(f)} | ${run(f, page)} |`)].join('\n');
}

/** The README's "Performance" table: the headline figures. */
export function headlineTable(file: FiguresFile, page = 'README.md'): string {
  return ['| measure | figure | run |', '|---|---|---|', ...file.figures.filter((f) => f.headline).map((f) => `| ${f.label} | ${shown(f)} | ${run(f, page)} |`)].join('\n');
}
