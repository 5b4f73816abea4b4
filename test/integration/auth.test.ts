import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { answer, device, end, expectProblem, expectRedisUnchanged, getCall, ringingCall, uid, type CallPair, type Device } from '../support/fixtures.js';
import { api, type ApiResponse } from '../support/http.js';
import { claims, handMadeJwt, hmacJwt, rs256Jwt, TEST_JWT_SECRET, tokenFor, unsignedJwt } from '../support/tokens.js';

/**
 * Authentication and authorization (docs/api.md "Authentication"): every HTTP
 * endpoint needs `Authorization: Bearer <JWT>` (HS256 with AUTH_JWT_SECRET here); every failure
 * is 401 and changes nothing; an installationId that is not the token's is 403; a non-member of
 * a call gets 404.
 */

let stack: Stack;
let url: string;
let call: CallPair;

beforeAll(async () => {
  stack = await startStack({ ROLES: 'api' });
  url = stack.url;
  call = await ringingCall(url);
});

afterAll(async () => {
  await stack?.stop();
});

const HEX_TOKEN = 'ab'.repeat(32);

/** Every authenticated endpoint, each with a request that would succeed for the callee. */
function endpoints(): { name: string; send: (authorization: string | undefined) => Promise<ApiResponse> }[] {
  const iid = call.callee.installationId;
  const send = (method: string, path: string, body?: unknown) => (authorization: string | undefined) =>
    api(url).request(method, path, body, authorization === undefined ? {} : { headers: { authorization } });
  return [
    { name: 'POST /v1/calls', send: send('POST', '/v1/calls', { callId: randomUUID(), calleeUserId: uid('u'), operationId: uid('op') }) },
    { name: 'GET /v1/calls/{id}', send: send('GET', `/v1/calls/${call.callId}`) },
    { name: 'POST /v1/calls/{id}/answer', send: send('POST', `/v1/calls/${call.callId}/answer`, { operationId: uid('op'), installationId: iid }) },
    { name: 'POST /v1/calls/{id}/end', send: send('POST', `/v1/calls/${call.callId}/end`, { operationId: uid('op'), reason: 'declined' }) },
    { name: 'POST /v1/calls/{id}/media-session', send: send('POST', `/v1/calls/${call.callId}/media-session`, {}) },
    {
      name: 'PUT /v1/installations/{id}/push-tokens/{kind}',
      send: send('PUT', `/v1/installations/${iid}/push-tokens/iosVoip`, { token: HEX_TOKEN, appId: 'com.example.app', iosEnvironment: 'production' }),
    },
    { name: 'DELETE /v1/installations/{id}/push-tokens/{kind}', send: send('DELETE', `/v1/installations/${iid}/push-tokens/iosVoip`) },
    { name: 'GET /v1/call-events', send: send('GET', '/v1/call-events') },
  ];
}

function calleeClaims(secondsFromNow = 3600, extra: Record<string, unknown> = {}) {
  return claims({ userId: call.callee.userId, installationId: call.callee.installationId }, secondsFromNow, extra);
}

function without(c: Record<string, unknown>, field: string): Record<string, unknown> {
  const copy = { ...c };
  delete copy[field];
  return copy;
}

interface Failure {
  name: string;
  authorization: () => string | undefined;
  detail: string | RegExp;
}

const MISSING_CLAIM = 'token is missing a required claim (exp, sub, iid)';

const failures: Failure[] = [
  { name: 'no token (no Authorization header)', authorization: () => undefined, detail: 'missing Authorization header; send "Authorization: Bearer <token>"' },
  { name: 'non-Bearer scheme (Basic)', authorization: () => 'Basic dXNlcjpwYXNz', detail: 'Authorization header must use the Bearer scheme' },
  { name: 'non-Bearer scheme (a valid JWT under "Token")', authorization: () => `Token ${call.callee.token}`, detail: 'Authorization header must use the Bearer scheme' },
  { name: 'Bearer without a token', authorization: () => 'Bearer ', detail: 'Authorization header must use the Bearer scheme' },
  { name: 'bad signature (another secret)', authorization: () => `Bearer ${hmacJwt('HS256', `${TEST_JWT_SECRET}-other`, calleeClaims())}`, detail: 'token signature is invalid' },
  {
    name: 'bad signature (claims changed after signing)',
    authorization: () => {
      const [header, , signature] = call.callee.token.split('.');
      const forged = Buffer.from(JSON.stringify(claims({ userId: call.caller.userId, installationId: call.caller.installationId }))).toString('base64url');
      return `Bearer ${header}.${forged}.${signature}`;
    },
    detail: 'token signature is invalid',
  },
  { name: 'expired', authorization: () => `Bearer ${hmacJwt('HS256', TEST_JWT_SECRET, calleeClaims(-30))}`, detail: 'token expired' },
  // fast-jwt reports an unsigned token as malformed before looking at its algorithm.
  { name: 'alg: none (hand-built, empty signature)', authorization: () => `Bearer ${unsignedJwt(calleeClaims())}`, detail: /^token (is malformed|algorithm is not accepted)$/ },
  {
    name: 'alg: none with a signature copied from a valid token',
    authorization: () => `Bearer ${handMadeJwt({ alg: 'none', typ: 'JWT' }, calleeClaims(), call.callee.token.split('.')[2])}`,
    detail: /^token (is malformed|algorithm is not accepted|signature is invalid)$/,
  },
  { name: 'wrong algorithm: HS384 with the right secret', authorization: () => `Bearer ${hmacJwt('HS384', TEST_JWT_SECRET, calleeClaims())}`, detail: 'token algorithm is not accepted' },
  { name: 'wrong algorithm: HS512 with the right secret', authorization: () => `Bearer ${hmacJwt('HS512', TEST_JWT_SECRET, calleeClaims())}`, detail: 'token algorithm is not accepted' },
  { name: 'wrong algorithm: RS256', authorization: () => `Bearer ${rs256Jwt(calleeClaims())}`, detail: 'token algorithm is not accepted' },
  { name: 'missing sub', authorization: () => `Bearer ${hmacJwt('HS256', TEST_JWT_SECRET, without(calleeClaims(), 'sub'))}`, detail: MISSING_CLAIM },
  { name: 'missing iid', authorization: () => `Bearer ${hmacJwt('HS256', TEST_JWT_SECRET, without(calleeClaims(), 'iid'))}`, detail: MISSING_CLAIM },
  { name: 'missing exp', authorization: () => `Bearer ${hmacJwt('HS256', TEST_JWT_SECRET, without(calleeClaims(), 'exp'))}`, detail: MISSING_CLAIM },
  { name: 'sub that is not a string', authorization: () => `Bearer ${hmacJwt('HS256', TEST_JWT_SECRET, calleeClaims(3600, { sub: 42 }))}`, detail: 'token has no valid sub claim' },
  { name: 'iid with a control character', authorization: () => `Bearer ${hmacJwt('HS256', TEST_JWT_SECRET, calleeClaims(3600, { iid: 'a\u0000b' }))}`, detail: 'token has no valid iid claim' },
  { name: 'not a JWT at all', authorization: () => 'Bearer abc.def.ghi', detail: 'token is malformed' },
];

describe('every auth failure → 401, on every endpoint, and Redis is unchanged', () => {
  it.each(failures)('$name', async (f) => {
    const authorization = f.authorization();
    await expectRedisUnchanged(stack.redis, async () => {
      for (const e of endpoints()) {
        const res = await e.send(authorization);
        expectProblem(res, 'unauthorized', f.detail);
        expect(res.headers.get('www-authenticate'), e.name).toBe('Bearer');
      }
    });
  });

  it('control: the same requests with a valid token succeed', async () => {
    const token = `Bearer ${hmacJwt('HS256', TEST_JWT_SECRET, calleeClaims())}`;
    const get = endpoints().find((e) => e.name === 'GET /v1/calls/{id}')!;
    const res = await get.send(token);
    expect(res.status).toBe(200);
    expect(res.text).toBe(call.created.text);
  });
});

describe('wrong installation → 403', () => {
  it('answering with an installationId that is not the token’s', async () => {
    const c = await ringingCall(url);
    const res = await expectRedisUnchanged(stack.redis, () => answer(c.callee, c.callId, { installationId: uid('not-mine') }));
    expectProblem(res, 'forbidden', "installationId does not match the session's installation");
    expect((await getCall(c.caller, c.callId)).text).toBe(c.created.text);
  });

  it('PUT and DELETE of another installation’s push token', async () => {
    const me = device(url);
    const other = device(url, me.userId);
    const body = { token: HEX_TOKEN, appId: 'com.example.app', iosEnvironment: 'production' };
    const put = await expectRedisUnchanged(stack.redis, () => me.api.put(`/v1/installations/${other.installationId}/push-tokens/iosVoip`, body));
    expectProblem(put, 'forbidden', "installation ID in the path does not match the session's installation");
    const del = await expectRedisUnchanged(stack.redis, () => me.api.del(`/v1/installations/${other.installationId}/push-tokens/iosVoip`));
    expectProblem(del, 'forbidden', "installation ID in the path does not match the session's installation");
  });
});

describe('a non-member of a call → 404 (the call is not revealed)', () => {
  let stranger: Device;
  beforeAll(() => {
    stranger = device(url);
  });

  it('reading', async () => {
    const res = await expectRedisUnchanged(stack.redis, () => getCall(stranger, call.callId));
    expectProblem(res, 'not_found', 'call not found');
    // Indistinguishable from a call that does not exist.
    const missing = await getCall(stranger, randomUUID());
    expect(missing.status).toBe(404);
    expect(missing.json).toEqual(res.json);
  });

  it('answering', async () => {
    const res = await expectRedisUnchanged(stack.redis, () => answer(stranger, call.callId));
    expectProblem(res, 'not_found', 'call not found');
    expect((await getCall(call.caller, call.callId)).text).toBe(call.created.text);
  });

  it('ending', async () => {
    const res = await expectRedisUnchanged(stack.redis, () => end(stranger, call.callId, 'localHangup'));
    expectProblem(res, 'not_found', 'call not found');
    expect((await getCall(call.caller, call.callId)).text).toBe(call.created.text);
  });

  it('asking for a media session', async () => {
    const res = await expectRedisUnchanged(stack.redis, () => stranger.api.post(`/v1/calls/${call.callId}/media-session`, {}));
    expectProblem(res, 'not_found', 'call not found');
  });

  it('the same user on another installation is a member (membership is per user)', async () => {
    const tablet = api(url, tokenFor({ userId: call.callee.userId, installationId: uid('tablet') }));
    const res = await tablet.get(`/v1/calls/${call.callId}`);
    expect(res.status).toBe(200);
    expect(res.text).toBe(call.created.text);
  });
});
