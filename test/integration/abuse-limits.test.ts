import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { startStack, type Stack } from '../support/stack.js';
import { device, expectProblem, uid } from '../support/fixtures.js';
import { api } from '../support/http.js';
import { connect, upgradeStatus, UpgradeRejected } from '../support/ws-client.js';

/**
 * Issue 5 abuse limits, each on its own server so one limit's traffic does not trip another:
 * per-user call creation, per-installation push-token writes, per-connection WebSocket
 * messages, per-IP failed authentications.
 */

let stack: Stack;
let failuresUrl: string;
let proxiedUrl: string;
beforeAll(async () => {
  stack = await startStack({ RATE_CALL_CREATES_PER_MIN: '3', RATE_PUSH_TOKEN_WRITES_PER_HOUR: '2', RATE_WS_MESSAGES_PER_10S: '3' });
  failuresUrl = (await stack.addServer({ RATE_AUTH_FAILURES_PER_MIN: '3' })).url;
  proxiedUrl = (await stack.addServer({ RATE_AUTH_FAILURES_PER_MIN: '3', CLIENT_IP_HEADER: 'x-forwarded-for' })).url;
});
afterAll(() => stack?.stop());

function retryAfter(headers: Headers): number {
  return Number(headers.get('retry-after'));
}

describe('abuse limits', () => {
  it('call creation per user: the 4th call in a minute gets 429 with retry-after, other users are unaffected', async () => {
    const caller = device(stack.url);
    const create = () => caller.api.post('/v1/calls', { callId: randomUUID(), calleeUserId: uid('callee'), operationId: uid('op') });
    for (let i = 0; i < 3; i++) expect((await create()).status).toBe(201);
    // The refused request changes nothing: no call, and its operationId stays unused.
    const refusedOp = uid('op');
    const refusedCallId = randomUUID();
    const refused = await caller.api.post('/v1/calls', { callId: refusedCallId, calleeUserId: uid('callee'), operationId: refusedOp });
    expectProblem(refused, 'rate_limited', 'too many calls created by this user; retry later');
    expect(await stack.redis.keys(`*${refusedOp}*`)).toEqual([]);
    expect(await stack.redis.keys(`*${refusedCallId}*`)).toEqual([]);
    expect((await caller.api.get(`/v1/calls/${refusedCallId}`)).status).toBe(404);
    expect(retryAfter(refused.headers)).toBeGreaterThanOrEqual(1);
    expect(retryAfter(refused.headers)).toBeLessThanOrEqual(60);
    const other = device(stack.url);
    expect((await other.api.post('/v1/calls', { callId: randomUUID(), calleeUserId: uid('callee'), operationId: uid('op') })).status).toBe(201);
  });

  it('push-token writes per installation: the 3rd write in the hour gets 429', async () => {
    const d = device(stack.url);
    const put = (token: string) =>
      d.api.put(`/v1/installations/${d.installationId}/push-tokens/androidPush`, { token, appId: 'com.example.app' });
    expect((await put('fcm-token-aaaaaaaa')).status).toBe(200);
    expect((await put('fcm-token-bbbbbbbb')).status).toBe(200);
    const refused = await put('fcm-token-cccccccc');
    expectProblem(refused, 'rate_limited', 'too many push token writes from this installation; retry later');
    expect(retryAfter(refused.headers)).toBeGreaterThan(60);
  });

  it('WebSocket messages per connection: over the limit the socket is closed with 4029', async () => {
    const d = device(stack.url);
    const ws = await connect(stack.url, d.token);
    for (let i = 0; i < 3; i++) {
      ws.send({ type: 'ping' });
      expect((await ws.next('pong')).type).toBe('pong');
    }
    for (let i = 0; i < 3; i++) ws.send({ type: 'ping' });
    const closed = await ws.closed;
    expect(closed.code).toBe(4029);
  });

  it('failed authentications per IP: after 3 failures even a valid token gets 429, on HTTP and on the upgrade', async () => {
    const bad = api(failuresUrl, 'not-a-jwt');
    for (let i = 0; i < 3; i++) expect((await bad.get(`/v1/calls/${randomUUID()}`)).status).toBe(401);
    const good = device(failuresUrl);
    const refused = await good.api.get(`/v1/calls/${randomUUID()}`);
    expectProblem(refused, 'rate_limited', 'too many failed authentications from this address');
    expect(retryAfter(refused.headers)).toBeGreaterThanOrEqual(1);
    const upgrade = await upgradeStatus(failuresUrl, good.token);
    expect(upgrade).toBeInstanceOf(UpgradeRejected);
    expect((upgrade as UpgradeRejected).status).toBe(429);
    // The limit is per server process here and this address only: the other server still serves it.
    expect((await api(stack.url, good.token).get(`/v1/calls/${randomUUID()}`)).status).toBe(404);
  });

  it('behind a proxy (CLIENT_IP_HEADER), failures count per forwarded address: that address is refused, another is not', async () => {
    const from = (ip: string) => ({ headers: { 'x-forwarded-for': `${ip}, 10.0.0.1` } });
    const bad = api(proxiedUrl, 'not-a-jwt');
    for (let i = 0; i < 3; i++) expect((await bad.get(`/v1/calls/${randomUUID()}`, from('198.51.100.7'))).status).toBe(401);
    const good = device(proxiedUrl);
    expectProblem(await good.api.get(`/v1/calls/${randomUUID()}`, from('198.51.100.7')), 'rate_limited', 'too many failed authentications from this address');
    expect((await good.api.get(`/v1/calls/${randomUUID()}`, from('198.51.100.8'))).status).toBe(404);
  });
});
