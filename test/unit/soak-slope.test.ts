import { describe, expect, it } from 'vitest';
import { slopePctPer10Min } from '../../bench/scenarios/soak.js';

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
