import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { readFigures, shown, standsForFigures, updatedFigures, type FiguresFile } from '../../bench/lib/figures.js';
import type { RunMeta } from '../../bench/lib/runMeta.js';
import type { ScenarioResult } from '../../bench/lib/report.js';

/**
 * bench/results/figures.json, the one file of current figures the README's and
 * docs/performance.md's tables are generated from (test/unit/generated-pages.test.ts keeps the
 * tables current): each figure has its value, unit, date, commit and a committed report; a bench
 * run updates the figures it measured and nothing else.
 */

const root = new URL('../../', import.meta.url);
const file = readFigures();

const meta = (over: Partial<RunMeta> = {}): RunMeta => ({
  startedAt: '2026-12-01T10:00:00.000Z',
  durationS: 60,
  mode: 'quick',
  command: 'npm run bench -- --scenarios lifecycle',
  gitCommit: 'abc1234',
  node: 'v20',
  redis: '7.0.15',
  machine: 'x',
  openFilesLimit: '20000',
  generators: 1,
  target: 'self-hosted: this run started Redis and the servers',
  redisLaunch: '',
  push: '',
  topology: 'split',
  ...over,
});
const lifecycle = (value: string): ScenarioResult => ({ id: 'lifecycle', title: 'l', headlines: [{ metric: 'sustained lifecycles/s (0 errors, p99 < 50 ms)', value }], goals: [], markdown: '', data: null });
const byId = (f: FiguresFile, id: string) => f.figures.find((x) => x.id === id)!;

describe('bench/results/figures.json', () => {
  it('every figure has a value, a unit, a date, a commit and a committed report', () => {
    expect(file.figures.length).toBeGreaterThan(10);
    expect(new Set(file.figures.map((f) => f.id)).size).toBe(file.figures.length);
    for (const f of file.figures) {
      expect(Number.isFinite(f.value), f.id).toBe(true);
      expect(['/s', 'ms', '×', 'B', ''], f.id).toContain(f.unit);
      expect(f.date, f.id).toMatch(/^\d{4}-\d{2}-\d{2}$/);
      expect(f.commit, f.id).toMatch(/^[0-9a-f]{7,40}$/);
      expect(f.report, f.id).toMatch(/^bench\/results\/.+\.md$/);
      expect(existsSync(new URL(f.report, root)), `${f.id}: ${f.report}`).toBe(true);
      expect(readFileSync(new URL(f.report, root), 'utf8'), `${f.id}: its report names its commit`).toContain(f.commit);
    }
    expect(file.figures.filter((f) => f.headline).length).toBeGreaterThan(5);
  });

  it('a run updates the figures it measured, with its date, commit and report, and keeps the rest', () => {
    const next = updatedFigures(file, meta(), [lifecycle('1,234/s for 6 s')], 'bench/results/x.md');
    expect(byId(next, 'lifecycle.sustained')).toMatchObject({ value: 1234, date: '2026-12-01', commit: 'abc1234', report: 'bench/results/x.md' });
    expect(byId(next, 'idle.bytesPerSocket')).toEqual(byId(file, 'idle.bytesPerSocket'));
    expect(shown(byId(next, 'lifecycle.sustained'))).toBe('1,234/s');
  });

  it('a disturbed run, a cluster run and a run against a deployment update nothing', () => {
    expect(updatedFigures(file, meta(), [lifecycle('1,234/s for 6 s (DISTURBED)')], 'x.md')).toEqual(file);
    expect(updatedFigures(file, meta({ topology: 'Redis Cluster of 3 primaries' }), [lifecycle('1,234/s')], 'x.md')).toEqual(file);
    expect(updatedFigures(file, meta({ target: 'https://calls.example.com' }), [lifecycle('1,234/s')], 'x.md')).toEqual(file);
  });

  it('a smoke run, a run written outside bench/results (--out) and an INVALID run record no figure', () => {
    const ok = lifecycle('1,234/s for 6 s');
    expect(standsForFigures(meta(), [ok], 'bench/results/x.md')).toBe(true);
    expect(standsForFigures(meta({ mode: 'smoke' }), [ok], 'bench/results/x.md')).toBe(false);
    expect(standsForFigures(meta(), [ok], '../../tmp/bench-smoke-1/x.md')).toBe(false);
    expect(standsForFigures(meta(), [{ ...ok, error: 'it failed' }], 'bench/results/x.md')).toBe(false);
  });

  it('docs/performance.md holds the current figures only: at most 250 lines, every figure in its table', () => {
    const page = readFileSync(new URL('docs/performance.md', root), 'utf8');
    expect(page.split('\n').length).toBeLessThanOrEqual(251);
    for (const f of file.figures) expect(page, f.id).toContain(`| ${f.label} | ${shown(f)} | [${f.date}, ${f.commit}](../${f.report}) |`);
  });
});
