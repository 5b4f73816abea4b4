import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { REPO_ROOT } from '../support/server.js';
import { answer, end, ringingCall } from '../support/fixtures.js';
import { parseExposition, scrapeMetrics, total } from '../support/exposition.js';
import { waitUntil } from '../support/wait.js';

/**
 * The shipped dashboard (deploy/grafana) and alert rules (deploy/prometheus) query only metrics a
 * real server exports: the names come from the `# TYPE` lines of a server running every role, and
 * the labels they group by or match on from its series after a call.
 */

let stack: Stack;
let exported: Map<string, string>;
/** Label names each exported series family carries (histograms under their base name). */
const labelsOf = new Map<string, Set<string>>();

beforeAll(async () => {
  stack = await startStack();
  // A call from start to end, so the call, HTTP and script series exist with their labels.
  const { callId, callee, caller } = await ringingCall(stack.url);
  expect((await answer(callee, callId)).status).toBe(200);
  expect((await end(caller, callId, 'localHangup')).status).toBe(200);
  await waitUntil('the end relayed', async () => total(await scrapeMetrics(stack.servers[0]!.metricsUrl), 'calling_calls_ended_total') === 1, 10_000);
  const text = await (await fetch(`${stack.servers[0]!.metricsUrl}/metrics`)).text();
  exported = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
  for (const sample of parseExposition(text).samples) {
    const family = exported.has(sample.name) ? sample.name : sample.name.replace(/_(bucket|sum|count)$/, '');
    const set = labelsOf.get(family) ?? new Set<string>();
    for (const l of Object.keys(sample.labels)) set.add(l);
    labelsOf.set(family, set);
  }
});

afterAll(async () => {
  await stack?.stop();
});

/** Whether a queried series name exists: histograms answer as `_bucket`, `_sum` and `_count`. */
function isExported(name: string): boolean {
  if (exported.has(name)) return true;
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  return m !== null && ['histogram', 'summary'].includes(exported.get(m[1]!) ?? '');
}

/** Metric names in a PromQL expression: identifiers with our prefix (labels and functions have none). */
const metricNames = (expr: string) => [...expr.matchAll(/\bcalling_[a-zA-Z0-9_]+/g)].map((m) => m[0]);

/** Labels Prometheus itself adds or histograms carry. */
const NOT_OURS = new Set(['le', 'instance', 'job']);

/**
 * Label names an expression groups by or matches on that none of its metrics carries (a query
 * that silently matches nothing). Checked for the metrics with series in this run's scrape.
 */
function unknownLabels(expr: string): string[] {
  const used = [
    ...[...expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)].flatMap((m) => m[1]!.split(',')),
    ...[...expr.matchAll(/\{([^}]*)\}/g)].flatMap((m) => [...m[1]!.matchAll(/([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)/g)].map((l) => l[1]!)),
  ].map((l) => l.trim()).filter((l) => l !== '' && !NOT_OURS.has(l));
  const families = metricNames(expr).map((n) => (exported.has(n) ? n : n.replace(/_(bucket|sum|count)$/, ''))).filter((f) => labelsOf.has(f));
  if (families.length === 0) return [];
  return used.filter((l) => !families.some((f) => labelsOf.get(f)!.has(l)));
}

describe('deploy/ dashboards and alert rules', () => {
  it('the server exports metrics under the calling_ prefix only', () => {
    expect(exported.size).toBeGreaterThan(20);
    expect([...exported.keys()].filter((n) => !n.startsWith('calling_'))).toEqual([]);
  });

  it('every Grafana panel query names exported metrics', () => {
    const dashboard = JSON.parse(readFileSync(join(REPO_ROOT, 'deploy/grafana/calling-backend.json'), 'utf8')) as {
      panels: { title: string; targets: { expr: string }[] }[];
    };
    const exprs = dashboard.panels.flatMap((p) => p.targets.map((t) => ({ panel: p.title, expr: t.expr })));
    expect(exprs.length).toBeGreaterThan(15);
    const unknown = exprs.flatMap(({ panel, expr }) => metricNames(expr).filter((n) => !isExported(n)).map((n) => `${panel}: ${n}`));
    expect(unknown).toEqual([]);
    for (const { panel, expr } of exprs) expect(metricNames(expr).length, panel).toBeGreaterThan(0);
    expect(exprs.flatMap(({ panel, expr }) => unknownLabels(expr).map((l) => `${panel}: ${l}`))).toEqual([]);
  });

  it('the alert rules cover the five conditions and name exported metrics', () => {
    const text = readFileSync(join(REPO_ROOT, 'deploy/prometheus/alerts.yml'), 'utf8');
    const alerts = [...text.matchAll(/^\s*- alert: (\S+)$/gm)].map((m) => m[1]);
    expect(alerts).toEqual(['CallingRingSweepLate', 'CallingRelayLagging', 'CallingPushFailing', 'CallingHttp5xx', 'CallingRedisUnavailable']);
    // Each rule's expression: `expr:` up to the rule's `for:`.
    const exprs = [...text.matchAll(/expr:([\s\S]*?)\n\s+for:/g)].map((m) => m[1]!);
    expect(exprs).toHaveLength(alerts.length);
    const needs = [
      'calling_ring_sweep_lateness_seconds_bucket',
      'calling_relay_lag_seconds_bucket',
      'calling_push_outcomes_total',
      'calling_http_requests_total',
      'calling_redis_up',
    ];
    needs.forEach((metric, i) => expect(metricNames(exprs[i]!), alerts[i]).toContain(metric));
    const unknown = exprs.flatMap((e) => metricNames(e).filter((n) => !isExported(n)));
    expect(unknown).toEqual([]);
    expect(exprs.flatMap(unknownLabels)).toEqual([]);
  });
});
