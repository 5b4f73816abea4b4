import { fmtNum, fmtPct, mdTable, type Headline, type ScenarioResult } from './report.js';
import { spreadOf, type Spread } from './spread.js';

/**
 * `--repeat N` (bench/README.md "Repeated runs and goal sizes"): one scenario run N times, reported as one. Each
 * headline's figure is given as the median of the runs and their spread, lowest–highest; a figure
 * whose spread (highest − lowest) is over UNSETTLED_SPREAD of its median is marked unsettled: the
 * machine or the hour moved it as much as any change would. The goals, the charts and the detail
 * are the median run's (the run whose first figure is the median); the scenario is INVALID when
 * any run was.
 */

export const UNSETTLED_SPREAD = 0.2;

/** A headline's figure: the number it states, when its value starts with one (`1,234/s`, `48.9 ms …`). */
export function figureOf(h: Headline): number | undefined {
  if (h.figure !== undefined) return h.figure;
  const m = /^\s*(-?[\d,]+(?:\.\d+)?)/.exec(h.value);
  return m ? Number(m[1]!.replace(/,/g, '')) : undefined;
}

export interface RepeatedFigure {
  metric: string;
  values: (number | undefined)[];
  spread: Spread;
  unsettled: boolean;
}

export function repeatedFigures(runs: readonly ScenarioResult[]): RepeatedFigure[] {
  const first = runs.find((r) => r.headlines.length > 0);
  if (!first) return [];
  return first.headlines.map((h, i) => {
    const values = runs.map((r) => {
      const same = r.headlines[i];
      return same && same.metric === h.metric ? figureOf(same) : undefined;
    });
    const spread = spreadOf(values.filter((v): v is number => v !== undefined));
    return { metric: h.metric, values, spread, unsettled: !(spread.relative <= UNSETTLED_SPREAD) };
  });
}

const fmt = (n: number) => (Number.isFinite(n) ? fmtNum(n, Math.abs(n) < 10 ? 2 : Math.abs(n) < 100 ? 1 : 0) : '–');

/** N runs of one scenario as one result. */
export function combineRuns(runs: readonly ScenarioResult[]): ScenarioResult {
  if (runs.length === 1) return runs[0]!;
  const figures = repeatedFigures(runs);
  // The median run: by the first figure every run has.
  const key = figures[0];
  let median = runs[0]!;
  if (key && Number.isFinite(key.spread.median)) {
    median = runs.reduce((best, r, i) => {
      const v = key.values[i];
      const b = key.values[runs.indexOf(best)];
      return v !== undefined && (b === undefined || Math.abs(v - key.spread.median) < Math.abs(b - key.spread.median)) ? r : best;
    }, runs[0]!);
  }
  const medianNo = runs.indexOf(median) + 1;
  const headlines: Headline[] = median.headlines.map((h, i) => {
    const f = figures.find((x) => x.metric === h.metric && figures.indexOf(x) === i);
    if (!f || !Number.isFinite(f.spread.median)) return { ...h, value: `${h.value} (run ${medianNo}; no figure in every run)` };
    return {
      ...h,
      value: `median ${fmt(f.spread.median)} (${fmt(f.spread.min)}–${fmt(f.spread.max)}, spread ${fmtPct(f.spread.relative)} over ${runs.length} runs)${f.unsettled ? ' UNSETTLED' : ''}; run ${medianNo}: ${h.value}`,
      figure: f.spread.median,
      unsettled: f.unsettled,
    };
  });
  const invalid = runs.flatMap((r, i) => [...(r.error ? [`run ${i + 1} failed to run: ${r.error.split('\n')[0]}`] : []), ...(r.invalid ?? []).map((x) => `run ${i + 1}: ${x}`)]);
  const table = mdTable(
    ['figure', ...runs.map((_, i) => `run ${i + 1}`), 'median', 'spread (highest − lowest) ÷ median', ''],
    figures.map((f) => [f.metric, ...f.values.map((v) => (v === undefined ? '–' : fmt(v))), fmt(f.spread.median), Number.isFinite(f.spread.relative) ? fmtPct(f.spread.relative) : '–', f.unsettled ? `**unsettled** (over ${fmtPct(UNSETTLED_SPREAD)})` : 'settled']),
  );
  return {
    id: median.id,
    title: `${median.title} (${runs.length} runs)`,
    headlines,
    goals: median.goals.map((g) => ({ ...g, note: `run ${medianNo} of ${runs.length} (the median run). ${g.note}` })),
    markdown: [
      `Run ${runs.length} times (\`--repeat ${runs.length}\`): each headline figure's median and spread; a spread over ${fmtPct(UNSETTLED_SPREAD)} of the median is unsettled. The detail below is run ${medianNo}'s, the median run.`,
      '',
      table,
      '',
      median.markdown,
    ].join('\n'),
    data: { ...(median.data as object | null), repeat: { runs: runs.length, medianRun: medianNo, figures, data: runs.map((r) => r.data) } },
    invalid,
  };
}
