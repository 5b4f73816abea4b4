import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { api } from '../support/http.js';
import { answer, device, end, shardBarriers, uid } from '../support/fixtures.js';
import { waitUntil } from '../support/wait.js';
import { closeAll, connect, type SignalingClient } from '../support/ws-client.js';
import { parseExposition, type Exposition, type Sample } from '../support/exposition.js';

/**
 * GET /metrics end to end, on the metrics listener (METRICS_PORT): the Prometheus text of a real
 * server process, parsed here (not with
 * prom-client), scraped before and after a full call lifecycle with both parties online, and the
 * liveness / readiness endpoints next to it.
 */

/** Samples named `calling_<name>` whose labels include all of `labels`. */
function find(e: Exposition, name: string, labels: Record<string, string> = {}): Sample[] {
  return e.samples.filter((s) => s.name === PREFIX + name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

const PREFIX = 'calling_';

/** The single sample `name{labels}`'s value; 0 when absent (a counter not yet incremented). */
function value(e: Exposition, name: string, labels: Record<string, string> = {}): number {
  const found = find(e, name, labels);
  expect(found.length, `${name}${JSON.stringify(labels)} matches ${found.length} samples`).toBeLessThanOrEqual(1);
  return found[0]?.value ?? 0;
}

async function scrape(url: string): Promise<Exposition> {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseExposition(await res.text());
}

async function scrapeUntil(url: string, done: (e: Exposition) => boolean, what: string, timeoutMs = 10_000): Promise<Exposition> {
  let last = await scrape(url);
  await waitUntil(`metrics: ${what}`, async () => done((last = await scrape(url))), timeoutMs, { intervalMs: 50 });
  return last;
}

let stack: Stack;
const sockets: SignalingClient[] = [];

beforeAll(async () => {
  stack = await startStack();
});

afterAll(async () => {
  await closeAll(sockets);
  await stack?.stop();
});

describe('the exposition parser', () => {
  it('reads names, escaped labels, special values and comments', () => {
    const e = parseExposition(
      [
        '# HELP x_total Something',
        '# TYPE x_total counter',
        'x_total{a="1",b="q\\"uo\\\\te",c="line\\nbreak"} 3',
        'y 4.5e-3',
        'n Nan',
        'z_bucket{le="+Inf"} +Inf 1700000000000',
        '',
      ].join('\n'),
    );
    expect(e.types.get('x_total')).toBe('counter');
    expect(e.help.get('x_total')).toBe('Something');
    expect(e.samples).toEqual([
      { name: 'x_total', labels: { a: '1', b: 'q"uo\\te', c: 'line\nbreak' }, value: 3 },
      { name: 'y', labels: {}, value: 0.0045 },
      { name: 'n', labels: {}, value: NaN },
      { name: 'z_bucket', labels: { le: '+Inf' }, value: Infinity },
    ]);
  });
});

describe('GET /healthz and /readyz', () => {
  it('a running server with Redis up is alive and ready', async () => {
    const health = await api(stack.url).get('/healthz');
    expect(health.status).toBe(200);
    expect(health.json).toEqual({ status: 'ok' });
    const ready = await api(stack.url).get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.json).toEqual({ status: 'ready', redis: true, accepting: true });
  });
});

describe('the metrics listener', () => {
  it('serves /metrics on its own port only: the public port answers 404', async () => {
    const pub = await api(stack.url).get('/metrics');
    expect(pub.status).toBe(404);
    const res = await fetch(`${stack.servers[0]!.metricsUrl}/metrics`);
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/^# HELP calling_http_requests_total /m);
    const other = await fetch(`${stack.servers[0]!.metricsUrl}/v1/calls`);
    expect(other.status).toBe(404);
    await other.body?.cancel();
  });
});

describe('GET /metrics', () => {
  it('the counters, histograms and gauges move with a full call lifecycle', async () => {
    const caller = device(stack.url, uid('caller'), uid('caller-phone'), 'Caller');
    const callee = device(stack.url, uid('callee'), uid('callee-phone'));
    const metricsUrl = stack.servers[0]!.metricsUrl;
    const base = await scrape(metricsUrl);
    const wsBefore = value(base, 'ws_open_sockets', { encoding: 'json' });

    // Declared types: counters, histograms, gauges.
    for (const [name, type] of [
      ['http_requests_total', 'counter'],
      ['http_request_duration_seconds', 'histogram'],
      ['redis_script_duration_seconds', 'histogram'],
      ['relay_changes_total', 'counter'],
      ['log_lines_dropped_total', 'counter'],
      ['ws_events_sent_total', 'counter'],
      ['ws_early_events_sent_total', 'counter'],
      ['ws_open_sockets', 'gauge'],
      ['outbox_pending_entries', 'gauge'],
      ['ringing_calls', 'gauge'],
      ['queue_push_waiting', 'gauge'],
      ['redis_up', 'gauge'],
      ['calls_created_total', 'counter'],
      ['calls_answered_total', 'counter'],
      ['calls_ended_total', 'counter'],
      ['call_answer_seconds', 'histogram'],
      ['call_ring_seconds', 'histogram'],
      ['relay_lag_seconds', 'histogram'],
      ['ring_sweep_lateness_seconds', 'histogram'],
      ['push_request_duration_seconds', 'histogram'],
    ] as const) {
      expect(base.types.get(PREFIX + name), name).toBe(type);
    }
    // Default process metrics are there too, and every name carries the prefix.
    expect(find(base, 'process_cpu_user_seconds_total').length).toBe(1);
    expect(base.samples.filter((x) => !x.name.startsWith(PREFIX)).map((x) => x.name)).toEqual([]);
    expect(value(base, 'redis_up')).toBe(1);

    // Both parties online, and one push token registered (no push provider configured).
    const callerWs = await connect(stack.url, caller.token, { name: 'caller' });
    const calleeWs = await connect(stack.url, callee.token, { name: 'callee' });
    sockets.push(callerWs, calleeWs);
    const reg = await callee.api.put(`/v1/installations/${callee.installationId}/push-tokens/androidPush`, {
      token: `fcm-${randomUUID()}`,
      appId: 'com.example.calls',
    });
    expect(reg.status, reg.text).toBe(200);

    // create → answer → end (the caller hangs up: the callee hears remoteEnded).
    const callId = randomUUID();
    const created = await caller.api.post('/v1/calls', { callId, calleeUserId: callee.userId, operationId: uid('op') });
    expect(created.status, created.text).toBe(201);
    await calleeWs.waitForEvents(1, 5000);
    const answered = await answer(callee, callId);
    expect(answered.status, answered.text).toBe(200);
    await callerWs.waitForEvents(1, 5000);
    const ended = await end(caller, callId, 'localHangup');
    expect(ended.status, ended.text).toBe(200);
    await calleeWs.waitForEvents(2, 5000);

    // Scraped before the barrier calls below, which would count too.
    const after = await scrapeUntil(
      metricsUrl,
      (e) => value(e, 'relay_changes_total') - value(base, 'relay_changes_total') >= 3 && value(e, 'outbox_pending_entries') === 0,
      'three changes relayed and an empty outbox',
    );

    // Nothing more reached the sockets: barrier calls on the call's outbox shard reach each user's
    // installations after anything the call's changes sent them (shardBarriers in
    // test/support/fixtures.ts); the checks leave the barrier calls' events out.
    const barriers = new Set<string>();
    const parties: [string, SignalingClient][] = [
      [caller.userId, callerWs],
      [callee.userId, calleeWs],
    ];
    await Promise.all(
      parties.map(async ([userId, ws]) => {
        const ids = await shardBarriers(stack.url, userId, [callId]);
        for (const id of ids) barriers.add(id);
        await ws.until(() => ids.every((id) => ws.events().some((e) => e.callId === id)), 5000, 'the barrier calls');
      }),
    );
    const ofCall = (ws: SignalingClient) => ws.events().filter((e) => !barriers.has(e.callId));
    expect(ofCall(callerWs).map((e) => e.type)).toEqual(['call.accepted']);
    expect(ofCall(calleeWs).map((e) => `${e.type}/${String(e.reason ?? '')}`)).toEqual(['call.invited/', 'call.ended/remoteEnded']);
    const delta = (name: string, labels: Record<string, string> = {}) => value(after, name, labels) - value(base, name, labels);

    // HTTP: one request per route with its status, and one latency observation each.
    expect(delta('http_requests_total', { route: '/v1/calls', method: 'POST', status: '201' })).toBe(1);
    expect(delta('http_requests_total', { route: '/v1/calls/:id/answer', method: 'POST', status: '200' })).toBe(1);
    expect(delta('http_requests_total', { route: '/v1/calls/:id/end', method: 'POST', status: '200' })).toBe(1);
    expect(delta('http_requests_total', { route: '/v1/installations/:id/push-tokens/:kind', method: 'PUT', status: '200' })).toBe(1);
    for (const [route, method] of [
      ['/v1/calls', 'POST'],
      ['/v1/calls/:id/answer', 'POST'],
      ['/v1/calls/:id/end', 'POST'],
    ] as const) {
      expect(delta('http_request_duration_seconds_count', { route, method }), route).toBe(1);
      expect(delta('http_request_duration_seconds_sum', { route, method }), route).toBeGreaterThan(0);
      // The +Inf bucket equals the count, and buckets are cumulative.
      const buckets = find(after, 'http_request_duration_seconds_bucket', { route, method });
      expect(buckets.length).toBeGreaterThan(1);
      const inf = buckets.find((b) => b.labels.le === '+Inf')!;
      expect(inf.value).toBe(value(after, 'http_request_duration_seconds_count', { route, method }));
      const byLe = buckets.map((b) => b.value);
      expect([...byLe].sort((a, b) => a - b)).toEqual(byLe);
    }
    // Call outcomes, counted once each as the relay passed the changes on: the caller hung up.
    expect(delta('calls_created_total')).toBe(1);
    expect(delta('calls_answered_total')).toBe(1);
    expect(delta('calls_ended_total', { reason: 'localHangup', ended_by: 'caller' })).toBe(1);
    expect(delta('call_answer_seconds_count')).toBe(1);
    expect(delta('call_ring_seconds_count', { outcome: 'answered' })).toBe(1);
    expect(delta('call_ring_seconds_sum', { outcome: 'answered' })).toBeCloseTo(delta('call_answer_seconds_sum'), 6);
    expect(delta('relay_lag_seconds_count')).toBe(3);

    // Redis scripts: one run of each state-changing script.
    for (const script of ['createCall', 'answerCall', 'endCall', 'registerPushToken']) {
      expect(delta('redis_script_duration_seconds_count', { script }), script).toBe(1);
      expect(delta('redis_script_duration_seconds_sum', { script }), script).toBeGreaterThan(0);
    }
    // Two sockets synced (and the relay/gateway read logs): readEvents ran.
    expect(delta('redis_script_duration_seconds_count', { script: 'readEvents' })).toBeGreaterThanOrEqual(2);

    // Relay: exactly the three changes, and the outbox is drained.
    expect(delta('relay_changes_total')).toBe(3);
    expect(value(after, 'outbox_pending_entries')).toBe(0);

    // Gateway: every event frame the two sockets received was counted, and they are both open.
    const received = ofCall(callerWs).length + ofCall(calleeWs).length;
    expect(received).toBe(3);
    // Each of them also early, ahead of the log (docs/signaling.md "Early events"), and counted as sent.
    const early = [callerWs, calleeWs].flatMap((ws) => ws.earlyFrames()).filter((f) => (f.event as { callId: string }).callId === callId).length;
    expect(early).toBe(3);
    expect(delta('ws_early_events_sent_total')).toBe(early);
    expect(delta('ws_events_sent_total')).toBe(received + early);
    expect(value(after, 'ws_open_sockets', { encoding: 'json' })).toBe(wsBefore + 2);
    expect(find(after, 'ws_open_sockets', { encoding: 'msgpack' })).toHaveLength(1);

    // Queues are reported (the ring timer was planned, then the call ended).
    expect(find(after, 'ringing_calls')).toHaveLength(1);
    expect(value(after, 'ringing_calls')).toBeGreaterThanOrEqual(0);
    expect(find(after, 'queue_push_waiting')).toHaveLength(1);

    // Closing the sockets brings the gauge back.
    await closeAll([callerWs, calleeWs]);
    await scrapeUntil(metricsUrl, (e) => value(e, 'ws_open_sockets', { encoding: 'json' }) === wsBefore, 'ws_open_sockets back to its start value', 5000);
  });

  it('ws_open_sockets equals the number of connected sockets', async () => {
    const metricsUrl = stack.servers[0]!.metricsUrl;
    const base = value(await scrape(metricsUrl), 'ws_open_sockets', { encoding: 'json' });
    const d = device(stack.url);
    const opened: SignalingClient[] = [];
    for (let i = 1; i <= 3; i++) {
      const ws = await connect(stack.url, device(stack.url, d.userId).token, { name: `s${i}` });
      opened.push(ws);
      sockets.push(ws);
      expect(value(await scrape(metricsUrl), 'ws_open_sockets', { encoding: 'json' })).toBe(base + i);
    }
    await closeAll(opened);
    await scrapeUntil(metricsUrl, (e) => value(e, 'ws_open_sockets', { encoding: 'json' }) === base, 'ws_open_sockets back down', 5000);
  });

  it('a process reports only the metrics of the roles it runs', async () => {
    const apiOnly = await stack.addServer({ ROLES: 'api' });
    const e = await scrape(apiOnly.metricsUrl);
    expect(e.types.get(PREFIX + 'http_requests_total')).toBe('counter');
    expect(find(e, 'outbox_pending_entries')).toHaveLength(1);
    for (const name of ['ws_open_sockets', 'ws_events_sent_total', 'relay_changes_total', 'ringing_calls']) {
      expect(e.types.has(PREFIX + name), name).toBe(false);
      expect(find(e, name), name).toEqual([]);
    }
    expect((await api(apiOnly.url).get('/readyz')).status).toBe(200);
  });
});
