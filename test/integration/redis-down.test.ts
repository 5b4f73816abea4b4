import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { device, expectProblem, ringingCall, uid, type CallPair } from '../support/fixtures.js';
import { api, type ApiResponse } from '../support/http.js';

/**
 * Redis down (docs/api.md "Errors": `unavailable`): the test's own redis-server is stopped
 * mid-test; every endpoint that needs the store answers 503 `unavailable` with retry-after, and
 * the server process stays up. It runs all roles (api, gateway, worker), so the relay and the
 * gateway lose their connections too.
 */

let stack: Stack;
let url: string;
let call: CallPair;
/** Every request sent while Redis is down, all at once (each waits for ioredis to give up). */
let whileDown: Record<string, ApiResponse>;

beforeAll(async () => {
  stack = await startStack();
  url = stack.url;
  call = await ringingCall(url);
  const reg = await call.callee.api.put(`/v1/installations/${call.callee.installationId}/push-tokens/androidPush`, {
    token: 'fcm-token-before-redis-stopped',
    appId: 'com.example.app',
  });
  expect(reg.status).toBe(200);
  await stack.stopRedis();
  const { caller, callee, callId } = call;
  const requests: Record<string, () => Promise<ApiResponse>> = {
    create: () => caller.api.post('/v1/calls', { callId: randomUUID(), calleeUserId: callee.userId, operationId: uid('op') }),
    get: () => caller.api.get(`/v1/calls/${callId}`),
    answer: () => callee.api.post(`/v1/calls/${callId}/answer`, { operationId: uid('op'), installationId: callee.installationId }),
    end: () => caller.api.post(`/v1/calls/${callId}/end`, { operationId: uid('op'), reason: 'localHangup' }),
    mediaSession: () => caller.api.post(`/v1/calls/${callId}/media-session`, {}),
    putToken: () =>
      callee.api.put(`/v1/installations/${callee.installationId}/push-tokens/androidPush`, { token: 'fcm-token-while-down', appId: 'com.example.app' }),
    deleteToken: () => callee.api.del(`/v1/installations/${callee.installationId}/push-tokens/androidPush`),
    callEvents: () => callee.api.get('/v1/call-events'),
    readyz: () => api(url).get('/readyz'),
    healthz: () => api(url).get('/healthz'),
  };
  const names = Object.keys(requests);
  const responses = await Promise.all(names.map((n) => requests[n]!()));
  whileDown = Object.fromEntries(names.map((n, i) => [n, responses[i]!]));
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

const DETAIL = 'the call store is unreachable; retry later';

function expectUnavailable(res: ApiResponse): void {
  expectProblem(res, 'unavailable', DETAIL);
  expect(res.headers.get('retry-after')).toBe('1');
}

describe('Redis down → 503 unavailable', () => {
  it.each(['create', 'get', 'answer', 'end', 'mediaSession', 'putToken', 'deleteToken', 'callEvents'])('%s → 503 with retry-after', (name) => {
    const res = whileDown[name]!;
    expect(res.status, `${name}: ${res.text}`).toBe(503);
    expectUnavailable(res);
  });

  it('readiness reports not ready; liveness stays ok', () => {
    expect(whileDown.readyz!.status).toBe(503);
    expect(whileDown.readyz!.json).toEqual({ status: 'not ready', redis: false, accepting: true });
    expect(whileDown.healthz!.status).toBe(200);
    expect(whileDown.healthz!.json).toEqual({ status: 'ok' });
  });

  it('errors that need no Redis keep their own status (401, 400, 404)', async () => {
    const anonymous = await api(url).get(`/v1/calls/${call.callId}`);
    expectProblem(anonymous, 'unauthorized', 'missing Authorization header; send "Authorization: Bearer <token>"');
    const bad = await device(url).api.post('/v1/calls', '{');
    expectProblem(bad, 'invalid_request', /^request body is not valid JSON: /);
    expectProblem(await call.caller.api.get('/v1/nope'), 'not_found', 'no route for GET /v1/nope');
  });

  it('the server process is still running and never leaked internals', async () => {
    const server = stack.servers[0]!;
    expect(server.child.exitCode).toBeNull();
    expect(server.child.signalCode).toBeNull();
    expect(server.logs()).not.toContain('fcm-token-while-down');
  });
});
