/**
 * What repeated runs of one measurement say (bench/README.md, "Comparing two builds"): the median
 * and the spread of each side's runs, and whether they allow a conclusion at all.
 */
export interface Spread {
  median: number;
  min: number;
  max: number;
  /** (max − min) ÷ median. */
  relative: number;
}

export function spreadOf(values: readonly number[]): Spread {
  const v = [...values].filter(Number.isFinite).sort((a, b) => a - b);
  if (v.length === 0) return { median: NaN, min: NaN, max: NaN, relative: NaN };
  const mid = Math.floor(v.length / 2);
  const median = v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
  return { median, min: v[0]!, max: v.at(-1)!, relative: (v.at(-1)! - v[0]!) / median };
}

/**
 * What the runs allow one to say of `a` against `b`: lower or higher only when the two sets of
 * runs do not overlap at all (with 5 runs each, overlap-free by chance once in 126; with 3, once
 * in 10), else nothing.
 */
export function verdict(a: Spread, b: Spread): 'lower' | 'higher' | 'inconclusive' {
  if (a.max < b.min) return 'lower';
  if (a.min > b.max) return 'higher';
  return 'inconclusive';
}

/** `median (min–max)` with `digits` decimals. */
export function fmtSpread(s: Spread, digits: number): string {
  return `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;
}
