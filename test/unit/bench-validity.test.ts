import { describe, expect, it } from 'vitest';
import { parseArgs } from '../../bench/lib/args.js';
import { combineRuns, UNSETTLED_SPREAD } from '../../bench/lib/repeat.js';
import { judgeGoals, type ScenarioResult } from '../../bench/lib/report.js';
import { cleanStep, invalidReasons, isInvalid, reasonsOf } from '../../bench/lib/validity.js';
import { htmlReport } from '../../bench/lib/htmlReport.js';

/**
 * Issue #50: a run with errors or an impossible count is INVALID (bench/lib/validity.ts), and
 * `--repeat N` reports medians and spreads, a spread over 20 % unsettled (bench/lib/repeat.ts).
 */

const result = (over: Partial<ScenarioResult> = {}): ScenarioResult => ({ id: 'timers', title: 'Ring timers', headlines: [], goals: [], markdown: '', data: null, ...over });

describe('validity', () => {
  it('errors, zero or unmeasured counts and broken conditions each make a reason; none: valid', () => {
    expect(invalidReasons({ errors: [{ where: 'run 1', errors: {} }], nonZero: [{ what: 'peak pending', n: 3000 }], hold: [{ ok: true, what: 'x' }] })).toEqual([]);
    expect(
      invalidReasons({
        errors: [{ where: 'run 1', errors: { 'call unreadable: WRONGTYPE': 3000 } }],
        nonZero: [
          { what: 'peak pending (calls were created)', n: 0 },
          { what: 'expiries/s', n: NaN },
          { what: 'sampled events', n: undefined },
        ],
        hold: [{ ok: false, what: '0 expiries committed of 3,000 calls created' }],
      }),
    ).toEqual([
      'errors in run 1: call unreadable: WRONGTYPE: 3,000',
      'peak pending (calls were created) is 0',
      'expiries/s is not measured',
      'sampled events is not measured',
      '0 expiries committed of 3,000 calls created',
    ]);
  });

  it('a call step must be clean and complete, with a non-zero rate', () => {
    expect(invalidReasons(cleanStep('sustained', { errors: {}, started: 10, completed: 10, achievedRate: 10 }))).toEqual([]);
    expect(invalidReasons(cleanStep('sustained', { errors: { timeout: 1 }, started: 10, completed: 9, achievedRate: 0 }))).toEqual([
      'errors in sustained: timeout: 1',
      'sustained: lifecycles/s is 0',
      'sustained: 9 of 10 lifecycles completed',
    ]);
  });

  it('a scenario that failed to run is INVALID, first reason first', () => {
    expect(isInvalid(result())).toBe(false);
    expect(reasonsOf(result({ error: 'Error: boom\n    at x', invalid: ['y is 0'] }))).toEqual(['failed to run: Error: boom', 'y is 0']);
  });

  it('the HTML report names the INVALID scenarios and marks their charts', () => {
    const timersData = { runs: [{ delivered: { count: 1, p50: 1, p95: 1, p99: 1, max: 1 }, committed: { count: 1, p50: 1, p95: 1, p99: 1, max: 1 }, peakPending: 1 }] };
    const meta = { startedAt: 'now', mode: 'smoke', command: 'x', gitCommit: 'x', machine: 'x', node: 'x', redis: 'x', topology: 'x' } as never;
    const page = htmlReport({ meta, results: [{ id: 'timers', title: 'Ring timers', data: timersData, invalid: ['peak pending is 0'] }, { id: 'micro', title: 'micro', data: null }] });
    expect(page).toMatch(/data-invalid="timers"/);
    expect(page).toMatch(/<tr data-scenario="timers" data-valid="false">/);
    expect(page).toMatch(/<tr data-scenario="micro" data-valid="true">/);
  });
});

describe('--repeat', () => {
  const run = (rate: string, p99: string, invalid: string[] = []): ScenarioResult =>
    result({ id: 'lifecycle', title: 'Lifecycle', headlines: [{ metric: 'sustained lifecycles/s', value: `${rate} for 6 s` }, { metric: 'p99', value: p99 }], invalid });

  it('gives each figure as the median and spread of the runs, and marks a spread over 20 % unsettled', () => {
    const r = combineRuns([run('300/s', '10 ms'), run('310/s', '30 ms'), run('305/s', '12 ms')]);
    expect(UNSETTLED_SPREAD).toBe(0.2);
    expect(r.title).toBe('Lifecycle (3 runs)');
    expect(r.headlines[0]!.figure).toBe(305);
    expect(r.headlines[0]!.unsettled).toBe(false);
    expect(r.headlines[0]!.value).toMatch(/^median 305 \(300–310, spread 3% over 3 runs\); run 3: 305\/s for 6 s$/);
    expect(r.headlines[1]!.figure).toBe(12);
    expect(r.headlines[1]!.unsettled).toBe(true);
    expect(r.headlines[1]!.value).toMatch(/UNSETTLED/);
    expect(r.invalid).toEqual([]);
  });

  it('is INVALID when any run was', () => {
    const r = combineRuns([run('300/s', '10 ms'), run('0/s', '10 ms', ['sustained lifecycles/s is 0'])]);
    expect(r.invalid).toEqual(['run 2: sustained lifecycles/s is 0']);
  });

  it('alternates the builds with --compare-ref: N rounds', () => {
    expect(parseArgs(['--compare-ref', 'HEAD~1', '--repeat', '3']).sizes.compareRef.runs).toBe(3);
    // --compare-ref runs the comparison alone, with or without --repeat.
    expect(parseArgs(['--compare-ref', 'HEAD~1']).scenarios).toEqual(['compareRef']);
    expect(parseArgs(['--compare-ref', 'HEAD~1', '--repeat', '3']).scenarios).toEqual(['compareRef']);
    expect(parseArgs(['--scenarios', 'timers', '--repeat', '3']).repeat).toBe(3);
    expect(parseArgs(['--size', 'smoke', '--scenarios', 'all']).scenarios).toEqual(['micro', 'ceilings', 'lifecycle', 'webhooks', 'storm', 'group', 'idle', 'timers', 'compare', 'reconnect', 'soak']);
  });

  it('gives every server it starts the settings of --server-env, each KEY=VALUE once, and refuses a bare key', () => {
    expect(parseArgs(['--server-env', 'RELAY_GATHER_MS=0', '--server-env=LOG_LEVEL=warn']).serverEnv).toEqual({ RELAY_GATHER_MS: '0', LOG_LEVEL: 'warn' });
    expect(parseArgs([]).serverEnv).toBeUndefined();
    expect(() => parseArgs(['--server-env', 'RELAY_GATHER_MS'])).toThrow(/KEY=VALUE/);
  });
});

describe('goals that say their size', () => {
  const goal = (status: 'MET' | 'MISSED', atGoalSize: boolean) => ({ goal: 'g', target: 't', measured: 'm', status, atGoalSize, note: 'n' });
  it('a goal missed below its size is not judged in a quick or smoke run; a full run judges every goal', () => {
    const r = result({ goals: [goal('MISSED', false), goal('MISSED', true), goal('MET', false)] });
    expect(judgeGoals(r, 'quick').goals.map((g) => g.status)).toEqual(['NOT JUDGED', 'MISSED', 'MET']);
    expect(judgeGoals(r, 'quick').goals[0]!.note).toMatch(/^not judged at quick size/);
    expect(judgeGoals(r, 'full').goals.map((g) => g.status)).toEqual(['MISSED', 'MISSED', 'MET']);
  });
});
