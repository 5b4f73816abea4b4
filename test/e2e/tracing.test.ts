import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { SpanKind } from '@opentelemetry/api';
import { loadConfig } from '../../src/config/config.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { startTracing } from '../../src/observability/tracing.js';
import { createLogger } from '../../src/util/logger.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { startStack, type Stack } from '../support/stack.js';
import { TEST_JWT_SECRET } from '../support/tokens.js';
import { device, uid, type Device } from '../support/fixtures.js';
import { apnsTo, iosToken, registerIos, startPushProviders, type PushProviders } from './push-helpers.js';
import { waitUntil } from './helpers.js';

/**
 * OpenTelemetry tracing (docs/operations.md "Tracing"): a call's trace follows it from the HTTP request
 * through its Lua change, the outbox (W3C trace context stored with the entry), the relay in a
 * worker, and the push send. Once with the SDK's in-memory exporter (an api and a worker server in
 * this process, meeting only through Redis), once across real processes exporting OTLP/HTTP to a
 * local collector.
 */

/** A client-side trace context: the request's parent. */
function clientTraceparent(): { traceId: string; spanId: string; header: string } {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, header: `00-${traceId}-${spanId}-01` };
}

async function createTracedCall(url: string, caller: Device, calleeUserId: string, traceparent: string): Promise<string> {
  const callId = randomUUID();
  const res = await fetch(`${url}/v1/calls`, {
    method: 'POST',
    headers: { authorization: `Bearer ${caller.token}`, 'content-type': 'application/json', traceparent },
    body: JSON.stringify({ callId, calleeUserId, operationId: uid('op') }),
  });
  expect(res.status, await res.text()).toBe(201);
  return callId;
}

interface SpanView {
  name: string;
  kind: number;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  attributes: Record<string, unknown>;
}

/** The chain request → Lua change → relay → push, each the parent of the next, in one trace. */
function expectCallTrace(spans: SpanView[], client: { traceId: string; spanId: string }, callId: string): void {
  const inTrace = spans.filter((s) => s.traceId === client.traceId);
  const one = (name: string) => {
    const found = inTrace.filter((s) => s.name === name);
    expect(found.map((s) => s.name), `spans named ${name} in ${JSON.stringify(inTrace.map((s) => s.name))}`).toEqual([name]);
    return found[0]!;
  };
  const request = one('POST /v1/calls');
  expect(request.kind).toBe(SpanKind.SERVER);
  expect(request.parentSpanId).toBe(client.spanId);
  expect(request.attributes['http.response.status_code']).toBe(201);
  const script = one('redis createCall');
  expect(script.parentSpanId).toBe(request.spanId);
  const relay = one('relay created');
  expect(relay.kind).toBe(SpanKind.CONSUMER);
  expect(relay.parentSpanId).toBe(script.spanId);
  expect(relay.attributes['calling.call_id']).toBe(callId);
  const push = one('push apns');
  expect(push.kind).toBe(SpanKind.CLIENT);
  expect(push.parentSpanId).toBe(relay.spanId);
  expect(push.attributes['calling.push_result']).toBe('accepted');
}

describe('in-memory exporter: api and worker in this process, joined through Redis', () => {
  const exporter = new InMemorySpanExporter();
  let redis: RedisServer;
  let providers: PushProviders;
  const servers: RunningServer[] = [];

  beforeAll(async () => {
    [redis, providers] = await Promise.all([startRedis(), startPushProviders()]);
    await startTracing('calling-backend-test', new SimpleSpanProcessor(exporter));
    const env = {
      ...providers.pushEnv,
      HOST: '127.0.0.1',
      PORT: '0',
      METRICS_PORT: '0',
      AUTH_JWT_SECRET: TEST_JWT_SECRET,
      RATE_CALL_CREATES_PER_MIN: '0',
      RATE_PUSH_TOKEN_WRITES_PER_HOUR: '0',
    };
    const logger = createLogger('silent');
    servers.push(await startServer(loadConfig({ ...env, ROLES: 'api' }), redis.url, logger));
    servers.push(await startServer(loadConfig({ ...env, ROLES: 'worker' }), redis.url, logger));
  });

  afterAll(async () => {
    for (const s of servers) await s.close();
    await providers?.close();
    await redis?.stop();
  });

  it('request → redis createCall → relay created → push apns, parent by parent, in the client’s trace', async () => {
    const url = `http://127.0.0.1:${servers[0]!.port}`;
    const callee = device(url);
    const token = iosToken();
    await registerIos(callee, token);
    const client = clientTraceparent();
    const callId = await createTracedCall(url, device(url), callee.userId, client.header);
    await waitUntil('the VoIP push', () => apnsTo(providers.apns, token).length === 1);
    const view = (s: ReadableSpan): SpanView => ({
      name: s.name,
      kind: s.kind,
      traceId: s.spanContext().traceId,
      spanId: s.spanContext().spanId,
      parentSpanId: s.parentSpanContext?.spanId,
      attributes: s.attributes,
    });
    await waitUntil('the push span', () => exporter.getFinishedSpans().some((s) => s.name === 'push apns' && s.spanContext().traceId === client.traceId));
    await waitUntil('the relay span', () => exporter.getFinishedSpans().some((s) => s.name === 'relay created' && s.spanContext().traceId === client.traceId));
    expectCallTrace(exporter.getFinishedSpans().map(view), client, callId);
  });
});

/** An OTLP/HTTP JSON collector: keeps every span it receives, with its service name. */
async function startCollector(): Promise<{ url: string; spans: (SpanView & { service: string })[]; close(): Promise<void> }> {
  const spans: (SpanView & { service: string })[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      if (req.url === '/v1/traces' && req.headers['content-type']?.startsWith('application/json')) {
        const doc = JSON.parse(body) as any;
        for (const rs of doc.resourceSpans ?? []) {
          const service = rs.resource?.attributes?.find((a: any) => a.key === 'service.name')?.value?.stringValue ?? '';
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              const attributes: Record<string, unknown> = {};
              for (const a of s.attributes ?? []) attributes[a.key] = a.value.stringValue ?? (a.value.intValue !== undefined ? Number(a.value.intValue) : a.value.boolValue);
              // OTLP kinds are 1-based (SPAN_KIND_INTERNAL = 1); the API's SpanKind is 0-based.
              spans.push({ service, name: s.name, kind: s.kind - 1, traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId || undefined, attributes });
            }
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe('OTLP across processes: an api process and a worker process', () => {
  let collector: Awaited<ReturnType<typeof startCollector>>;
  let providers: PushProviders;
  let stack: Stack;

  beforeAll(async () => {
    [collector, providers] = await Promise.all([startCollector(), startPushProviders()]);
    const otel = { TRACING: 'otlp', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${collector.url}/v1/traces`, OTEL_BSP_SCHEDULE_DELAY: '50' };
    stack = await startStack({ ...providers.pushEnv, ...otel, ROLES: 'api' });
    await stack.addServer({ ...providers.pushEnv, ...otel, ROLES: 'worker' });
  });

  afterAll(async () => {
    await stack?.stop();
    await providers?.close();
    await collector?.close();
  });

  it('the api process exports the request and its Lua change, the worker the relay and the push: one trace', async () => {
    const callee = device(stack.url);
    const token = iosToken();
    await registerIos(callee, token);
    const client = clientTraceparent();
    const callId = await createTracedCall(stack.url, device(stack.url), callee.userId, client.header);
    await waitUntil('the VoIP push', () => apnsTo(providers.apns, token).length === 1);
    await waitUntil('four spans of the trace at the collector', () => collector.spans.filter((s) => s.traceId === client.traceId).length >= 4, 10_000);
    expectCallTrace(collector.spans, client, callId);
    const services = new Map(collector.spans.filter((s) => s.traceId === client.traceId).map((s) => [s.name, s.service]));
    expect(services.get('POST /v1/calls')).toBe('calling-backend-api');
    expect(services.get('redis createCall')).toBe('calling-backend-api');
    expect(services.get('relay created')).toBe('calling-backend-worker');
    expect(services.get('push apns')).toBe('calling-backend-worker');
  });

  it('a request without a traceparent starts a trace of its own, followed the same way', async () => {
    const callee = device(stack.url);
    const callId = randomUUID();
    const res = await device(stack.url).api.post('/v1/calls', { callId, calleeUserId: callee.userId, operationId: uid('op') });
    expect(res.status, res.text).toBe(201);
    const relayOf = () => collector.spans.find((s) => s.name === 'relay created' && s.attributes['calling.call_id'] === callId);
    await waitUntil('the relay span at the collector', () => relayOf() !== undefined, 10_000);
    const relay = relayOf()!;
    const byId = (id: string | undefined) => collector.spans.find((s) => s.spanId === id);
    await waitUntil('the request span at the collector', () => byId(byId(relay.parentSpanId)?.parentSpanId) !== undefined, 10_000);
    const script = byId(relay.parentSpanId)!;
    const request = byId(script.parentSpanId)!;
    expect([script.name, request.name]).toEqual(['redis createCall', 'POST /v1/calls']);
    expect(request.parentSpanId).toBeUndefined();
    expect(new Set([relay.traceId, script.traceId, request.traceId]).size).toBe(1);
  });
});
