import { describe, expect, it } from 'vitest';
import { afterWarmup, p99Windows, slopePctPer10Min } from '../../bench/scenarios/soak.js';
import { maxOf, minOf } from '../../bench/lib/sampler.js';

/** The soak's growth measure (bench/scenarios/soak.ts): least-squares slope in % of the mean per 10 minutes. */
describe('soak slope', () => {
  it('is 0 for a flat series, and the growth per 10 min over the mean for a line', () => {
    expect(slopePctPer10Min([1, 2, 3, 4], [100, 100, 100, 100])).toBe(0);
    // 1 unit a minute around a mean of 100: 10 units per 10 minutes, 10 %.
    expect(slopePctPer10Min([1, 2, 3, 4, 5], [98, 99, 100, 101, 102])).toBeCloseTo(10, 10);
    expect(slopePctPer10Min([1, 2, 3], [102, 100, 98])).toBeCloseTo(-20, 10);
  });

  it('sees through noise around a flat line, and needs two samples', () => {
    expect(Math.abs(slopePctPer10Min([1, 2, 3, 4, 5, 6], [100, 103, 97, 102, 98, 100]))).toBeLessThan(5);
    expect(slopePctPer10Min([1], [100])).toBeNaN();
  });
});

/** Which minutes the soak judges: those that began after the warm-up, and the p99 windows among them. */
describe('soak windows', () => {
  const minutes = (n: number) => Array.from({ length: n }, (_, i) => ({ fromMs: i * 63_000, atMs: (i + 1) * 63_000 }));

  it('leaves out a minute that began in the warm-up, even when it ended after it', () => {
    expect(afterWarmup(minutes(4), 60_000).map((s) => s.fromMs)).toEqual([63_000, 126_000, 189_000]);
  });

  it('compares five minutes each in a long run, a third each in a short one, nothing with one minute', () => {
    const long = p99Windows(minutes(25))!;
    expect([long.first.length, long.last.length]).toEqual([5, 5]);
    expect(long.first[0]!.fromMs).toBe(0);
    expect(long.last.at(-1)!.fromMs).toBe(24 * 63_000);
    const short = p99Windows(minutes(6))!;
    expect([short.first.length, short.last.length]).toEqual([2, 2]);
    expect(p99Windows(minutes(2))!.first.length).toBe(1);
    expect(p99Windows(minutes(1))).toBeUndefined();
  });

  it('keeps the floor of noisy readings, ignoring missing ones', () => {
    const readings = [{ heap: 90 }, { heap: 40 }, { heap: undefined }, { heap: 117 }];
    expect(minOf(readings, (r) => r.heap)).toBe(40);
    expect(maxOf(readings, (r) => r.heap)).toBe(117);
    expect(minOf([], () => 1)).toBeNaN();
  });
});
