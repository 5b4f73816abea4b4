import type { HistogramSummary } from './histogram.js';

/** What each scenario hands back, and how the run is printed and written. */

/** NOT JUDGED: a smaller run than the goal's size missed it (it cannot say whether the goal holds at its size). */
export type Status = 'MET' | 'MISSED' | 'NOT MEASURED' | 'NOT JUDGED';

export interface Goal {
  goal: string;
  target: string;
  measured: string;
  status: Status;
  /** Whether the figure was measured at the goal's size (a quick run measures smaller). */
  atGoalSize: boolean;
  /** What bounds the figure, or why it was not measured. */
  note: string;
}

export interface Headline {
  metric: string;
  value: string;
  /** The limit measured in the same run this figure is compared with. */
  ceiling?: string;
  ratio?: string;
  bound?: string;
  /** The number `value` states, when it does not start with it (`--repeat` takes medians of it: bench/lib/repeat.ts). */
  figure?: number;
  /** With --repeat: the runs' spread was over 20 % of their median. */
  unsettled?: boolean;
}

export interface ScenarioResult {
  id: string;
  title: string;
  headlines: Headline[];
  goals: Goal[];
  /** The scenario's section of the Markdown report (without its heading). */
  markdown: string;
  /** Everything measured, for the JSON results. */
  data: unknown;
  error?: string;
  /**
   * Why its figures cannot be trusted (bench/lib/validity.ts): errors, or a count impossible for
   * what it did. Empty or absent: valid. A scenario that failed to run (`error`) is INVALID too.
   */
  invalid?: string[];
}

// ---------- number formatting ----------

export function fmtNum(n: number, digits = 0): string {
  if (!Number.isFinite(n)) return String(n);
  return n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return '–';
  if (ms < 1) return `${ms.toFixed(3)} ms`;
  if (ms < 10) return `${ms.toFixed(2)} ms`;
  if (ms < 100) return `${ms.toFixed(1)} ms`;
  return `${fmtNum(ms)} ms`;
}

export function fmtRate(perSecond: number, unit = '/s'): string {
  return `${fmtNum(perSecond, perSecond < 100 ? 1 : 0)}${unit}`;
}

export function fmtBytes(b: number): string {
  if (!Number.isFinite(b)) return '–';
  const abs = Math.abs(b);
  if (abs < 1024) return `${b.toFixed(0)} B`;
  if (abs < 1024 * 1024) return `${(b / 1024).toFixed(2)} KB`;
  if (abs < 1024 ** 3) return `${(b / 1024 / 1024).toFixed(1)} MB`;
  return `${(b / 1024 ** 3).toFixed(2)} GB`;
}

export function fmtPct(share: number): string {
  return `${(share * 100).toFixed(0)}%`;
}

export function ratio(value: number, ceiling: number | undefined): string {
  if (ceiling === undefined || !Number.isFinite(ceiling) || ceiling <= 0) return 'n/a (no ceiling measured)';
  return `${(value / ceiling).toFixed(2)}×`;
}

// ---------- tables ----------

export function mdTable(headers: string[], rows: (string | number)[][]): string {
  const esc = (c: string | number) => String(c).replace(/\|/g, '\\|').replace(/\n/g, ' ');
  return [
    `| ${headers.map(esc).join(' | ')} |`,
    `| ${headers.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.map(esc).join(' | ')} |`),
  ].join('\n');
}

/** A plain-text table for the terminal. */
export function textTable(headers: string[], rows: string[][], maxWidth = 60): string {
  const cut = (s: string) => (s.length > maxWidth ? s.slice(0, maxWidth - 1) + '…' : s);
  const all = [headers, ...rows].map((r) => r.map(cut));
  const widths = headers.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(all[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...all.slice(1).map(line)].join('\n');
}

/** Per-step latency rows: step, count, p50, p95, p99, max. */
export function latencyTable(summaries: Record<string, HistogramSummary>): string {
  return mdTable(
    ['step', 'count', 'p50', 'p95', 'p99', 'max'],
    Object.entries(summaries).map(([k, s]) => [k, fmtNum(s.count), fmtMs(s.p50), fmtMs(s.p95), fmtMs(s.p99), fmtMs(s.max)]),
  );
}

export function errorList(errors: Record<string, number>): string {
  const e = Object.entries(errors);
  return e.length === 0 ? 'none' : e.map(([k, v]) => `${k}: ${fmtNum(v)}`).join('; ');
}

/**
 * A goal a smaller run than the goal's size missed is not judged (bench/README.md "Repeated runs and goal sizes"): the run
 * cannot reach the goal's size, so its miss says nothing of the goal.
 */
export function judgeGoals(r: ScenarioResult, mode: 'smoke' | 'quick' | 'full'): ScenarioResult {
  if (mode === 'full') return r;
  return {
    ...r,
    goals: r.goals.map((g) => (g.status === 'MISSED' && !g.atGoalSize ? { ...g, status: 'NOT JUDGED', note: `not judged at ${mode} size (missed at this size; --full runs the goal's size). ${g.note}` } : g)),
  };
}
