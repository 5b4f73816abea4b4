import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { chartsOf, type RunResults } from '../../bench/lib/htmlReport.js';

/**
 * The HTML report's "delivery vs Socket.IO" charts from the compare scenario's data, without a
 * browser (the Chromium suite draws the reference run): the committed reference run's shape,
 * and the current one with the durable rename row (bench/README.md, `compare`).
 */

const reference = JSON.parse(readFileSync(new URL('../../bench/results/reference-quick-2026-11-25.json', import.meta.url), 'utf8')) as RunResults;
const compareCharts = (data: unknown) => chartsOf({ meta: reference.meta, results: [{ id: 'compare', title: 'compare', data }] });

const side = (perSecond: number, rate: number, p99: number) => ({
  system: 'x',
  throughput: { perSecond, latency: {} },
  latency: { rate, latency: { 'delivery (send → socket)': { count: 1, p50: 1, p95: 2, p99, max: p99 + 1 } } },
});

describe('bench HTML report: compare charts', () => {
  it('draws the reference run (ours and Socket.IO only) as before', () => {
    const data = reference.results.find((r) => r.id === 'compare')!.data as { ours: { throughput: { perSecond: number } }; socketio: { throughput: { perSecond: number } } };
    const t = compareCharts(data).find((c) => c.id === 'compare-throughput')!;
    expect(t.labels).toEqual(['calling-backend', 'Socket.IO 4 + Redis adapter']);
    expect(t.datasets[0]!.data).toEqual([Math.round(data.ours.throughput.perSecond), Math.round(data.socketio.throughput.perSecond)]);
  });

  it('adds the durable rename row as a third bar, labelled with its own rate when it differs', () => {
    const charts = compareCharts({ ours: side(3000, 1000, 5), socketio: side(2000, 1000, 9), rename: side(1500, 700, 7) });
    const t = charts.find((c) => c.id === 'compare-throughput')!;
    expect(t.labels).toEqual(['calling-backend', 'Socket.IO 4 + Redis adapter', 'calling-backend, durable renames']);
    expect(t.datasets[0]!.data).toEqual([3000, 2000, 1500]);
    const l = charts.find((c) => c.id === 'compare-latency')!;
    expect(l.title).toContain('1000/s');
    expect(l.datasets.map((d) => d.label)).toEqual(['calling-backend', 'Socket.IO 4 + Redis adapter', 'calling-backend, durable renames (at 700/s)']);
    expect(l.datasets.map((d) => d.data[2])).toEqual([5, 9, 7]);
  });
});
