import { describe, expect, it } from 'vitest';
import { searchAndSustain, type StepResult } from '../../bench/scenarios/callSteps.js';
import type { RateSearch } from '../../bench/lib/args.js';

/**
 * The lifecycle and group scenarios' rate search (bench/README.md, the lifecycle row): a machine
 * stands for the system, passing a short search step up to one rate and a long sustained run up to
 * a lower one, as a real one does (a long run sees rarer stalls).
 */
const quick: RateSearch = { warmupMs: 0, warmupRate: 0, factor: 1.5, stepMs: 2500, maxSteps: 5, bisections: 2, sustainedMs: 6000, timeoutMs: 5000 };

function machine(stepLimit: number, sustainedLimit: number) {
  const runs: { label: string; rate: number }[] = [];
  const step = async (label: string, rate: number, durationMs: number) => {
    runs.push({ label, rate });
    const limit = durationMs === quick.sustainedMs ? sustainedLimit : stepLimit;
    return { label, targetRate: rate, pass: rate <= limit } as unknown as StepResult;
  };
  return { runs, step };
}

describe('the sustained rate search', () => {
  it('after a step down passes, runs once halfway back to the lowest failing rate: the figure is within 10 %, not 20 %', async () => {
    // Search: 150, 225, 338 pass, 507 fails; bisections 423 pass, 465 fails. Sustained 423 fails,
    // 338 (80 %) passes, then halfway: 381 passes (the machine sustains 390).
    const m = machine(440, 390);
    const { best, fail, sustained } = await searchAndSustain(quick, 150, 10, m.step);
    expect(m.runs.map((r) => r.rate)).toEqual([150, 225, 338, 507, 423, 465, 423, 338, 381]);
    expect([best, fail]).toEqual([423, 465]);
    expect(sustained.targetRate).toBe(381);
    expect(sustained.targetRate / 390).toBeGreaterThan(0.9);
  });

  it('keeps the step down when the run halfway back fails too', async () => {
    const m = machine(440, 350);
    const { sustained } = await searchAndSustain(quick, 150, 10, m.step);
    expect(m.runs.slice(-3).map((r) => [r.label, r.rate])).toEqual([
      ['sustained', 423],
      ['sustained (retry 1 at 80%)', 338],
      ['sustained (halfway to the failing rate)', 381],
    ]);
    expect(sustained.targetRate).toBe(338);
  });

  it('runs nothing more when the first sustained run passes, or when the search has no bisections (the smoke size)', async () => {
    const passing = machine(440, 440);
    expect((await searchAndSustain(quick, 150, 10, passing.step)).sustained.targetRate).toBe(423);
    expect(passing.runs.filter((r) => r.label.startsWith('sustained'))).toHaveLength(1);

    const smoke = machine(1000, 4);
    const { sustained } = await searchAndSustain({ ...quick, maxSteps: 1, bisections: 0 }, 10, 10, smoke.step);
    expect(smoke.runs.map((r) => r.label)).toEqual(['search 1', 'sustained', 'sustained (retry 1 at 80%)', 'sustained (retry 2 at 64%)', 'sustained (retry 3 at 51%)']);
    expect(sustained.pass).toBe(false);
  });
});
