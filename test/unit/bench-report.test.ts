import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { htmlReport, type RunResults } from '../../bench/lib/htmlReport.js';

/**
 * The bench's HTML report (docs/performance.md "How to reproduce"), built from the committed
 * reference run's JSON results and opened in Chromium from a file, offline: every chart is drawn
 * (a Chart.js instance on a canvas with ink on it) and holds the run's own numbers, read here from
 * the JSON independently of the report's code.
 */

declare const document: { querySelectorAll(s: string): ArrayLike<{ dataset: Record<string, string>; querySelector(s: string): any }>; body: { dataset: Record<string, string> } };
declare const Chart: { getChart(canvas: unknown): { data: { labels: string[]; datasets: { label: string; data: number[] }[] } } | undefined };

const REFERENCE = new URL('../../bench/results/reference-quick-2026-11-25.json', import.meta.url);
const run = JSON.parse(readFileSync(REFERENCE, 'utf8')) as RunResults;
const data = (id: string) => run.results.find((r) => r.id === id)!.data as any;

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
let browser: Browser;
const dir = mkdtempSync(join(tmpdir(), 'bench-report-'));

interface Drawn {
  id: string;
  labels: string[];
  datasets: { label: string; data: (number | null)[] }[];
  inked: number;
}
let drawn: Drawn[] = [];
let chartCount = '';

beforeAll(async () => {
  const file = join(dir, 'report.html');
  writeFileSync(file, htmlReport(run));
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-dev-shm-usage'] });
  const page = await browser.newPage();
  // Offline: any request that is not the file itself fails the test.
  const requests: string[] = [];
  page.on('request', (r) => { if (!r.url().startsWith('file:')) requests.push(r.url()); });
  await page.goto(pathToFileURL(file).href);
  await page.waitForFunction(() => document.body.dataset.charts !== undefined);
  expect(requests).toEqual([]);
  chartCount = await page.evaluate(() => document.body.dataset.charts!);
  drawn = await page.evaluate(() =>
    Array.from(document.querySelectorAll('figure[data-chart]')).map((f) => {
      const canvas = f.querySelector('canvas');
      const chart = Chart.getChart(canvas);
      const pixels: Uint8ClampedArray = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      let inked = 0;
      for (let i = 3; i < pixels.length; i += 4) if (pixels[i]! > 0) inked++;
      return {
        id: f.dataset.chart!,
        labels: chart?.data.labels ?? [],
        datasets: (chart?.data.datasets ?? []).map((d) => ({ label: d.label, data: d.data })),
        inked,
      };
    }),
  );
}, 60_000);

afterAll(async () => {
  await browser?.close();
  rmSync(dir, { recursive: true, force: true });
});

const chart = (id: string) => {
  const c = drawn.find((d) => d.id === id);
  expect(c, `chart ${id}`).toBeDefined();
  return c!;
};
const near = (a: number | null | undefined, b: number) => expect(a).toBeCloseTo(b, 1);

describe('bench HTML report', () => {
  it('draws every chart, each on a canvas with ink on it', () => {
    expect(drawn.map((d) => d.id).sort()).toEqual(['answer-latency', 'compare-latency', 'compare-throughput', 'lifecycle-cpu', 'lifecycle-latency', 'timer-lateness']);
    expect(Number(chartCount)).toBe(drawn.length);
    for (const d of drawn) expect(d.inked, d.id).toBeGreaterThan(1000);
  });

  it('lifecycle: p50/p95/p99 against the offered rate of every search step', () => {
    const search = data('lifecycle').steps.filter((s: any) => s.label.startsWith('search')).sort((a: any, b: any) => a.targetRate - b.targetRate);
    const c = chart('lifecycle-latency');
    expect(c.labels.map((l) => parseInt(l, 10))).toEqual(search.map((s: any) => s.targetRate));
    for (const p of ['p50', 'p95', 'p99']) {
      const series = c.datasets.find((d) => d.label === p)!;
      search.forEach((s: any, i: number) => near(series.data[i], s.latency.lifecycle[p]));
    }
  });

  it('lifecycle: CPU per lifecycle of each process, per step', () => {
    const sustained = data('lifecycle').steps.find((s: any) => s.label === data('lifecycle').sustained);
    const c = chart('lifecycle-cpu');
    const i = c.labels.findIndex((l) => l.startsWith(`${sustained.label} (`));
    expect(i).toBeGreaterThanOrEqual(0);
    for (const [process, ms] of Object.entries(sustained.cost.cpuMsPerLifecycle)) {
      near(c.datasets.find((d) => d.label === process)!.data[i], ms as number);
    }
  });

  it('timers: lateness percentiles at the socket and committed, per run', () => {
    const runs = data('timers').runs;
    const c = chart('timer-lateness');
    expect(c.labels).toEqual(['p50', 'p95', 'p99', 'max']);
    expect(c.datasets).toHaveLength(runs.length * 2);
    near(c.datasets[0]!.data[2], runs[0].delivered.p99);
    near(c.datasets[1]!.data[3], runs[0].committed.max);
  });

  it('compare: our deliveries against Socket.IO, saturated and at the common rate', () => {
    const { ours, socketio } = data('compare');
    const t = chart('compare-throughput');
    expect(t.datasets[0]!.data).toEqual([ours.throughput.perSecond, socketio.throughput.perSecond]);
    const l = chart('compare-latency');
    const sioDelivery = Object.entries(socketio.latency.latency).find(([k]) => /deliver/.test(k))![1] as any;
    near(l.datasets[1]!.data[2], sioDelivery.p99);
  });
});

describe('bench HTML report: the soak', () => {
  const soakRun = JSON.parse(readFileSync(new URL('../../bench/results/reference-soak-quick-2026-11-25.json', import.meta.url), 'utf8')) as RunResults;
  const soak = soakRun.results.find((r) => r.id === 'soak')!.data as any;
  let charts: Drawn[] = [];

  beforeAll(async () => {
    const file = join(dir, 'soak.html');
    writeFileSync(file, htmlReport(soakRun));
    const page = await browser.newPage();
    await page.goto(pathToFileURL(file).href);
    await page.waitForFunction(() => document.body.dataset.charts !== undefined);
    charts = await page.evaluate(() =>
      Array.from(document.querySelectorAll('figure[data-chart^="soak-"]')).map((f) => {
        const chart = Chart.getChart(f.querySelector('canvas'));
        return { id: f.dataset.chart!, labels: chart?.data.labels ?? [], datasets: (chart?.data.datasets ?? []).map((d) => ({ label: d.label, data: d.data })), inked: 0 };
      }),
    );
  }, 60_000);

  it('draws memory, keys and latency per minute, with each series and its slope', () => {
    expect(charts.map((c) => c.id)).toEqual(['soak-memory', 'soak-keys', 'soak-latency']);
    const keys = charts.find((c) => c.id === 'soak-keys')!;
    expect(keys.labels).toEqual(soak.samples.map((s: any) => String(s.minute)));
    expect(keys.datasets[0]!.data).toEqual(soak.samples.map((s: any) => s.redis.keys));
    const memory = charts.find((c) => c.id === 'soak-memory')!;
    const worker = memory.datasets.find((d) => d.label.startsWith('worker heap'))!;
    expect(worker.label).toContain(`${soak.series.find((s: any) => s.name === 'worker heap').slopePctPer10Min.toFixed(1)} %/10 min`);
    soak.samples.forEach((s: any, i: number) => near(worker.data[i], s.processes.worker.heapBytes / 1048576));
  });
});
