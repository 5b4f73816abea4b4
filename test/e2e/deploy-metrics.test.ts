import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { REPO_ROOT } from '../support/server.js';

/**
 * The shipped dashboard (deploy/grafana) and alert rules (deploy/prometheus) query only metrics a
 * real server exports: the names come from the `# TYPE` lines of a server running every role.
 */

let stack: Stack;
let exported: Map<string, string>;

beforeAll(async () => {
  stack = await startStack();
  const text = await (await fetch(`${stack.servers[0]!.metricsUrl}/metrics`)).text();
  exported = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
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
  });
});
