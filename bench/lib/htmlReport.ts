import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { RunMeta } from './runMeta.js';

/**
 * The bench's HTML report: the run's figures as charts, drawn by Chart.js, which is inlined from
 * node_modules so the page works offline and from a file. The page is a pure function of the
 * run's JSON results (`<time>.json`), so a report can be rebuilt from them, and each chart is
 * built here from one scenario's `data` by the function for its id in CHARTS: a new chart is one
 * more entry there.
 */

export interface ChartSpec {
  id: string;
  title: string;
  type: 'line' | 'bar';
  /** The x axis: one label per point. */
  labels: string[];
  datasets: { label: string; data: number[] }[];
  xTitle: string;
  yTitle: string;
  /** Bars of one label stacked into one. */
  stacked?: boolean;
  note?: string;
  /** The scenario it was drawn from (set by chartsOf). */
  scenario?: string;
}

/** The results JSON as bench/lib/output.ts writes it. */
export interface RunResults {
  meta: RunMeta;
  results: readonly { id: string; title: string; data: unknown; error?: string | undefined; invalid?: string[] | undefined }[];
}

interface Summary {
  count: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

const PERCENTILES = ['p50', 'p95', 'p99'] as const;
const round = (n: number, digits = 2) => (Number.isFinite(n) ? Number(n.toFixed(digits)) : NaN);

interface LifecycleStep {
  label: string;
  targetRate: number;
  achievedRate: number;
  pass: boolean;
  latency: Record<string, Summary | undefined>;
  cost?: { cpuMsPerLifecycle: Record<string, number> };
}

function lifecycleCharts(data: { steps: LifecycleStep[]; sustained: string }): ChartSpec[] {
  const search = data.steps.filter((s) => s.label.startsWith('search')).sort((a, b) => a.targetRate - b.targetRate);
  const charts: ChartSpec[] = [];
  for (const [step, title] of [
    ['lifecycle', 'Lifecycle latency against the offered rate (rate search)'],
    ['answer → accepted (ws)', 'Answer → call.accepted latency against the offered rate (rate search)'],
  ] as const) {
    const withStep = search.filter((s) => s.latency[step]);
    if (!withStep.length) continue;
    charts.push({
      id: step === 'lifecycle' ? 'lifecycle-latency' : 'answer-latency',
      title,
      type: 'line',
      labels: withStep.map((s) => `${s.targetRate}/s${s.pass ? '' : ' (failed)'}`),
      datasets: PERCENTILES.map((p) => ({ label: p, data: withStep.map((s) => round(s.latency[step]![p])) })),
      xTitle: 'offered lifecycles/s',
      yTitle: 'ms',
    });
  }
  const costed = data.steps.filter((s) => s.cost && !s.label.startsWith('warm'));
  if (costed.length) {
    const processes = [...new Set(costed.flatMap((s) => Object.keys(s.cost!.cpuMsPerLifecycle)))];
    charts.push({
      id: 'lifecycle-cpu',
      title: 'CPU per lifecycle by process',
      type: 'bar',
      stacked: true,
      labels: costed.map((s) => `${s.label} (${Math.round(s.achievedRate)}/s)`),
      datasets: processes.map((p) => ({ label: p, data: costed.map((s) => round(s.cost!.cpuMsPerLifecycle[p] ?? 0, 3)) })),
      xTitle: 'step',
      yTitle: 'CPU ms per lifecycle',
      note: 'Each step is one rate; the stack is every measured process: server, Redis, load generator and fake push providers.',
    });
  }
  return charts;
}

interface GroupData {
  steps: LifecycleStep[];
  perMember: { metric: string; ratio: number }[];
}

/** The group scenario: fan-out and join latencies per step (in the order run), and a member's cost against a one-to-one lifecycle's. */
function groupCharts(data: GroupData): ChartSpec[] {
  const steps = data.steps.filter((s) => !s.label.startsWith('warm'));
  const charts: ChartSpec[] = [];
  if (steps.length) {
    charts.push({
      id: 'group-latency',
      title: 'Group calls: invitation fan-out to the last socket and join → call.participant, p99 per step',
      type: 'line',
      labels: steps.map((s) => `${s.label} ${s.targetRate}/s${s.pass ? '' : ' (failed)'}`),
      datasets: [
        { label: 'fan-out to the last socket p99', data: steps.map((s) => round(s.latency['invite fan-out, last socket (ws)']?.p99 ?? NaN)) },
        { label: 'join → call.participant p99', data: steps.map((s) => round(s.latency['join → call.participant (ws)']?.p99 ?? NaN)) },
      ],
      xTitle: 'step (offered group calls/s)',
      yTitle: 'ms',
    });
  }
  if (data.perMember.length) {
    charts.push({
      id: 'group-member-cost',
      title: "Group calls: a member's share of the call's cost ÷ a one-to-one lifecycle's (goal ≤ 0.5)",
      type: 'bar',
      labels: data.perMember.map((r) => r.metric),
      datasets: [{ label: 'per member ÷ one-to-one', data: data.perMember.map((r) => round(r.ratio)) }],
      xTitle: 'cost',
      yTitle: 'ratio',
    });
  }
  return charts;
}

interface TimersRunData {
  peakPending: number;
  delivered?: Summary;
  committed: Summary;
}

function timersCharts(data: { runs: TimersRunData[] }): ChartSpec[] {
  if (!data.runs.length) return [];
  const cols = ['p50', 'p95', 'p99', 'max'] as const;
  return [
    {
      id: 'timer-lateness',
      title: 'Timer lateness (unanswered calls): distribution per run',
      type: 'bar',
      labels: [...cols],
      datasets: data.runs.flatMap((r, i) => [
        { label: `run ${i + 1} at the callee's socket (${r.peakPending} pending)`, data: cols.map((c) => round(r.delivered?.[c] ?? NaN)) },
        { label: `run ${i + 1} committed in Redis`, data: cols.map((c) => round(r.committed[c])) },
      ]),
      xTitle: 'percentile',
      yTitle: 'ms late',
    },
  ];
}

interface DeliverySide {
  system: string;
  bytesPerSocket?: number;
  throughput: { perSecond: number; latency: Record<string, Summary | undefined> };
  latency: { rate: number; latency: Record<string, Summary | undefined> };
}

/** The delivery latency of one leg: the first summary whose name says delivery. */
const deliveryOf = (latency: Record<string, Summary | undefined>) => Object.entries(latency).find(([k]) => /deliver/i.test(k))?.[1];

/**
 * `ours` and `socketio`: in-call messages socket to socket (runs before the messages had event
 * deliveries posted over HTTP in these two); `rename`, when there: our durable event path.
 */
function compareCharts(data: { ours: DeliverySide; socketio: DeliverySide; rename?: DeliverySide } | null): ChartSpec[] {
  if (!data?.ours || !data.socketio) return [];
  const sides = [
    { name: 'calling-backend', side: data.ours },
    { name: 'Socket.IO 4 + Redis adapter', side: data.socketio },
    ...(data.rename ? [{ name: 'calling-backend, durable renames', side: data.rename }] : []),
  ];
  const cols = ['p50', 'p95', 'p99', 'max'] as const;
  return [
    {
      id: 'compare-throughput',
      title: 'Deliveries per second, saturated: ours against Socket.IO',
      type: 'bar',
      labels: sides.map((s) => s.name),
      datasets: [{ label: 'deliveries/s', data: sides.map((s) => round(s.side.throughput.perSecond, 0)) }],
      xTitle: 'system',
      yTitle: 'deliveries/s',
    },
    {
      id: 'compare-latency',
      title: `Delivery latency at the common rate (${data.ours.latency.rate}/s)`,
      type: 'bar',
      labels: [...cols],
      datasets: sides.map(({ name, side }) => ({
        label: side.latency.rate === data.ours.latency.rate ? name : `${name} (at ${side.latency.rate}/s)`,
        data: cols.map((c) => round(deliveryOf(side.latency.latency)?.[c] ?? NaN)),
      })),
      xTitle: 'percentile',
      yTitle: 'ms',
      note: 'A missing bar: that system delivered nothing measurable at this rate (see the Markdown report for its errors).',
    },
  ];
}

interface SoakData {
  samples: { minute: number }[];
  series: { name: string; unit: 'bytes' | 'ms' | 'keys'; values: number[]; slopePctPer10Min: number }[];
}

function soakCharts(data: SoakData): ChartSpec[] {
  const labels = data.samples.map((s) => `${s.minute}`);
  const slope = (s: SoakData['series'][number]) => `${s.name} (${Number.isFinite(s.slopePctPer10Min) ? `${s.slopePctPer10Min >= 0 ? '+' : ''}${s.slopePctPer10Min.toFixed(1)} %/10 min` : 'no slope'})`;
  const of = (unit: string, scale = 1) => data.series.filter((s) => s.unit === unit).map((s) => ({ label: slope(s), data: s.values.map((v) => round(v / scale)) }));
  const charts: ChartSpec[] = [
    { id: 'soak-memory', title: 'Soak: memory per minute (slope after the warm-up)', type: 'line', labels, datasets: of('bytes', 1048576), xTitle: 'minute', yTitle: 'MB' },
    { id: 'soak-keys', title: 'Soak: Redis keys per minute', type: 'line', labels, datasets: of('keys'), xTitle: 'minute', yTitle: 'keys' },
    { id: 'soak-latency', title: 'Soak: answered lifecycle p99 and event-loop delay p99 per minute', type: 'line', labels, datasets: of('ms'), xTitle: 'minute', yTitle: 'ms' },
  ];
  return charts.filter((c) => c.datasets.length > 0);
}

/**
 * The reconnect storm: the share of the killed gateway's devices synced again, over the time since
 * the kill, in 50 ms steps. One dataset per system measured (Socket.IO's joins it when measured).
 */
function reconnectCharts(data: { resyncedMs: number[]; onA: number; socketio?: { resyncedMs: number[]; onA: number } }): ChartSpec[] {
  const systems = [{ label: 'calling backend', ...data }, ...(data.socketio ? [{ label: 'Socket.IO 4, connection state recovery', ...data.socketio }] : [])].filter((s) => s.resyncedMs.length > 0 && s.onA > 0);
  if (!systems.length) return [];
  const stepMs = 50;
  const steps = Math.ceil(Math.max(...systems.flatMap((s) => s.resyncedMs)) / stepMs) + 1;
  const labels = Array.from({ length: steps + 1 }, (_, i) => `${i * stepMs}`);
  const share = (s: { resyncedMs: number[]; onA: number }) => labels.map((_, i) => round((100 * s.resyncedMs.filter((ms) => ms <= i * stepMs).length) / s.onA));
  return [{ id: 'reconnect-resynced', title: 'Reconnect storm: devices of the killed server synced again', type: 'line', labels, datasets: systems.map((s) => ({ label: s.label, data: share(s) })), xTitle: 'ms since the kill', yTitle: '% resynced' }];
}

/** Charts per scenario id; a scenario without an entry has none. */
const CHARTS: Record<string, (data: never) => ChartSpec[]> = {
  lifecycle: lifecycleCharts,
  group: groupCharts,
  timers: timersCharts,
  compare: compareCharts,
  soak: soakCharts,
  reconnect: reconnectCharts,
};

/** Every chart of a run, in scenario order. */
export function chartsOf(run: RunResults): ChartSpec[] {
  return run.results.flatMap((r) => (r.error || r.data == null || !CHARTS[r.id] ? [] : CHARTS[r.id]!(r.data as never).map((c) => ({ ...c, scenario: r.id }))));
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

let chartJs: string | undefined;
function chartJsSource(): string {
  // The package exports no path to its UMD build: it sits beside the CommonJS entry point.
  chartJs ??= readFileSync(join(dirname(createRequire(import.meta.url).resolve('chart.js')), 'chart.umd.min.js'), 'utf8');
  return chartJs;
}

/** The whole page: metadata, then one canvas per chart, drawn when the page loads. */
export function htmlReport(run: RunResults): string {
  const charts = chartsOf(run);
  const m = run.meta;
  const meta: [string, string][] = [
    ['started', m.startedAt],
    ['mode', m.mode],
    ['command', m.command],
    ['commit', m.gitCommit],
    ['machine', m.machine],
    ['Node.js', m.node],
    ['Redis', m.redis],
    ['topology', m.topology],
  ];
  // Validity first (bench/lib/validity.ts): an INVALID scenario's charts are a breakage, not a measurement.
  const validity = run.results.map((r) => {
    const reasons = [...(r.error ? [`failed to run: ${r.error.split('\n')[0]}`] : []), ...(r.invalid ?? [])];
    return { id: r.id, reasons };
  });
  const invalidIds = validity.filter((v) => v.reasons.length > 0).map((v) => v.id);
  // JSON inside <script>: `<` escaped so no string in it can close the element.
  const json = JSON.stringify(charts).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>calling-backend bench ${escapeHtml(m.startedAt)}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin-bottom: 16px; }
td { padding: 2px 12px 2px 0; vertical-align: top; }
td:first-child { color: #666; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 24px; }
figure { margin: 0; border: 1px solid #ddd; border-radius: 6px; padding: 12px; }
figcaption { font-weight: 600; margin-bottom: 8px; }
.note { color: #666; font-size: 12px; margin-top: 6px; }
.invalid, .validity strong { color: #b00020; }
</style>
</head>
<body>
<h1>calling-backend bench</h1>
<table>${meta.map(([k, v]) => `<tr><td>${escapeHtml(k)}</td><td>${escapeHtml(v)}</td></tr>`).join('')}</table>
${invalidIds.length ? `<p class="invalid" data-invalid="${escapeHtml(invalidIds.join(','))}"><strong>INVALID scenarios in this run: ${escapeHtml(invalidIds.join(', '))}.</strong> Their figures are a breakage (errors, or a count impossible for what the scenario did), not a measurement.</p>` : ''}
<table class="validity">${validity.map((v) => `<tr data-scenario="${escapeHtml(v.id)}" data-valid="${v.reasons.length ? 'false' : 'true'}"><td>${escapeHtml(v.id)}</td><td>${v.reasons.length ? '<strong>INVALID</strong>: ' + escapeHtml(v.reasons.join('; ')) : 'valid'}</td></tr>`).join('')}</table>
<p>The figures behind every chart, and what bounds each, are in the Markdown report of the same run.</p>
<div class="charts">
${charts.map((c) => `<figure data-chart="${escapeHtml(c.id)}"><figcaption>${c.scenario !== undefined && invalidIds.includes(c.scenario) ? 'INVALID run: ' : ''}${escapeHtml(c.title)}</figcaption><canvas id="chart-${escapeHtml(c.id)}" width="520" height="300"></canvas>${c.note ? `<div class="note">${escapeHtml(c.note)}</div>` : ''}</figure>`).join('\n')}
</div>
<script>${chartJsSource()}</script>
<script>
const CHARTS = ${json};
for (const c of CHARTS) {
  new Chart(document.getElementById('chart-' + c.id), {
    type: c.type,
    data: { labels: c.labels, datasets: c.datasets },
    options: {
      animation: false,
      responsive: false,
      scales: {
        x: { stacked: !!c.stacked, title: { display: true, text: c.xTitle } },
        y: { stacked: !!c.stacked, beginAtZero: true, title: { display: true, text: c.yTitle } },
      },
    },
  });
}
document.body.dataset.charts = String(CHARTS.length);
</script>
</body>
</html>
`;
}
