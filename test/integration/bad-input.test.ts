import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { acceptedCall, expectJson, expectProblem, expectRedisUnchanged, ringingCall, uid, type CallPair } from '../support/fixtures.js';
import { rawRequest, type ApiResponse } from '../support/http.js';
import type { ErrorCode } from '../../src/commands/errors.js';

/**
 * Bad input (docs/api.md "Errors"): every malformed request gets a problem+json error
 * whose detail names the offending field, and leaves the whole Redis keyspace byte-for-byte
 * unchanged (SCAN + DUMP + PEXPIRETIME of every key, before and after). The server runs the api
 * role only, so nothing else writes to Redis while a test looks.
 */

let stack: Stack;
let url: string;
let ringing: CallPair;
let accepted: CallPair;

const HEX_TOKEN = '0123456789abcdef'.repeat(4);
const LIMIT = 16 * 1024;

beforeAll(async () => {
  stack = await startStack({ ROLES: 'api' });
  url = stack.url;
  ringing = await ringingCall(url);
  accepted = await acceptedCall(url);
  const reg = await ringing.callee.api.put(`/v1/installations/${ringing.callee.installationId}/push-tokens/iosVoip`, {
    token: HEX_TOKEN,
    appId: 'com.example.app',
    iosEnvironment: 'production',
  });
  expect(reg.status).toBe(200);
});

afterAll(async () => {
  await stack?.stop();
});

/** Sends the request and checks the problem body and that Redis did not change. */
async function rejects(send: () => Promise<ApiResponse>, code: ErrorCode, detail: string | RegExp): Promise<ApiResponse> {
  const res = await expectRedisUnchanged(stack.redis, send);
  expectProblem(res, code, detail);
  return res;
}

const createBody = () => ({ callId: randomUUID(), calleeUserId: uid('callee'), operationId: uid('op') });

/**
 * An oversized upload with a declared content-length, sent over a raw socket in one write: the
 * server may answer 413 and close before reading it, which would make fetch fail with EPIPE.
 */
function oversized(method: string, path: string, token: string, body: string): Promise<ApiResponse> {
  const head =
    `${method} ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n` +
    `authorization: Bearer ${token}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`;
  return rawRequest(url, head, body);
}

describe('POST /v1/calls', () => {
  it('invalid JSON → 400', async () => {
    for (const text of ['{"callId":', '{callId: 1}', "{'a':1}", 'not json', '{"a":1}}']) {
      await rejects(() => ringing.caller.api.post('/v1/calls', text), 'invalid_request', /^request body is not valid JSON: /);
    }
  });

  it('a JSON value that is not an object → 400', async () => {
    for (const text of ['[]', 'null', '"call"', '42', 'true', '[{"callId":"x"}]']) {
      await rejects(() => ringing.caller.api.post('/v1/calls', text), 'invalid_request', 'request body must be a JSON object');
    }
  });

  it('deeply nested JSON → 400', async () => {
    await rejects(() => ringing.caller.api.post('/v1/calls', '['.repeat(8000) + ']'.repeat(8000)), 'invalid_request', 'request body must be a JSON object');
    await rejects(
      () => ringing.caller.api.post('/v1/calls', JSON.stringify({ ...createBody(), callId: JSON.parse('['.repeat(2000) + ']'.repeat(2000)) })),
      'invalid_request',
      'callId: Invalid input: expected string, received array',
    );
  });

  it('an empty body → 400', async () => {
    await rejects(() => ringing.caller.api.post('/v1/calls', ''), 'invalid_request', 'request body is required (a JSON object)');
  });

  it('missing fields → 400 naming each', async () => {
    await rejects(
      () => ringing.caller.api.post('/v1/calls', {}),
      'invalid_request',
      'callId: Invalid input: expected string, received undefined; calleeUserId: Invalid input: expected string, received undefined; operationId: Invalid input: expected string, received undefined',
    );
    for (const field of ['callId', 'calleeUserId', 'operationId'] as const) {
      const body: Record<string, unknown> = createBody();
      delete body[field];
      await rejects(() => ringing.caller.api.post('/v1/calls', body), 'invalid_request', `${field}: Invalid input: expected string, received undefined`);
    }
  });

  it('a title on a one-to-one create → 400, nothing created (a title is a group call\'s)', async () => {
    for (const title of ['Standup', '', 5]) {
      await rejects(
        () => ringing.caller.api.post('/v1/calls', { ...createBody(), title }),
        'invalid_request',
        "title: only a group call (calleeUserIds) has a title; a one-to-one call shows the caller's name",
      );
    }
  });

  it('wrong types → 400 naming each', async () => {
    const cases: [string, unknown, string][] = [
      ['callId', 5, 'callId: Invalid input: expected string, received number'],
      ['calleeUserId', 7, 'calleeUserId: Invalid input: expected string, received number'],
      ['operationId', true, 'operationId: Invalid input: expected string, received boolean'],
      ['video', 'yes', 'video: Invalid input: expected boolean, received string'],
      ['video', 1, 'video: Invalid input: expected boolean, received number'],
      ['callId', null, 'callId: Invalid input: expected string, received null'],
    ];
    for (const [field, value, detail] of cases) {
      await rejects(() => ringing.caller.api.post('/v1/calls', { ...createBody(), [field]: value }), 'invalid_request', detail);
    }
  });

  it('invalid callId and operationId values → 400', async () => {
    for (const field of ['callId', 'operationId']) {
      for (const value of ['', 'has space', 'x'.repeat(129), 'ümlaut', 'a/b', 'a?b', 'a#b']) {
        await rejects(
          () => ringing.caller.api.post('/v1/calls', { ...createBody(), [field]: value }),
          'invalid_request',
          `${field}: must be 1 to 128 characters of A-Z a-z 0-9 . _ ~ : -`,
        );
      }
    }
  });

  it('invalid calleeUserId values → 400', async () => {
    for (const value of ['', 'x'.repeat(129), 'bad\u0000id', 'line\nbreak', 'tab\there', 'del\u007f', 'brace{tag}']) {
      await rejects(
        () => ringing.caller.api.post('/v1/calls', { ...createBody(), calleeUserId: value }),
        'invalid_request',
        'calleeUserId: must be 1 to 128 characters without control characters or braces',
      );
    }
    for (const value of [123, null, {}, ['u']]) {
      await rejects(() => ringing.caller.api.post('/v1/calls', { ...createBody(), calleeUserId: value }), 'invalid_request', /^calleeUserId: Invalid input: expected string/);
    }
  });

  it('calling yourself → 400', async () => {
    await rejects(
      () => ringing.caller.api.post('/v1/calls', { ...createBody(), calleeUserId: ringing.caller.userId }),
      'invalid_request',
      'calleeUserId: you cannot call yourself',
    );
  });

  it('an oversized body → 413 (declared length)', async () => {
    const body = JSON.stringify({ ...createBody(), pad: 'x'.repeat(LIMIT) });
    await rejects(
      () => oversized('POST', '/v1/calls', ringing.caller.token, body),
      'payload_too_large',
      `request body is ${Buffer.byteLength(body)} bytes; the limit is ${LIMIT}`,
    );
  });

  it('an oversized body → 413 (chunked, no declared length)', async () => {
    // Transfer-Encoding: chunked, 20 chunks of 1 KiB: the server only learns the size while reading.
    const chunk = `400\r\n${'x'.repeat(1024)}\r\n`;
    const head =
      'POST /v1/calls HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n' +
      `authorization: Bearer ${ringing.caller.token}\r\ntransfer-encoding: chunked\r\n\r\n`;
    const send = () => rawRequest(url, head, chunk.repeat(20) + '0\r\n\r\n');
    await rejects(send, 'payload_too_large', `request body exceeds the limit of ${LIMIT} bytes`);
  });

  it('control: a body of exactly the limit is accepted', async () => {
    const base = { ...createBody(), pad: '' };
    const pad = LIMIT - Buffer.byteLength(JSON.stringify(base));
    const body = JSON.stringify({ ...base, pad: 'x'.repeat(pad) });
    expect(Buffer.byteLength(body)).toBe(LIMIT);
    const res = await ringing.caller.api.post('/v1/calls', body);
    expectJson(res, 201);
  });

  it('wrong content type → 415', async () => {
    const body = JSON.stringify(createBody());
    await rejects(
      () => ringing.caller.api.post('/v1/calls', body, { headers: { 'content-type': 'text/plain' } }),
      'unsupported_media_type',
      'content-type must be application/json, got "text/plain"',
    );
    await rejects(
      () => ringing.caller.api.post('/v1/calls', body, { headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
      'unsupported_media_type',
      'content-type must be application/json, got "application/x-www-form-urlencoded"',
    );
    await rejects(
      () => ringing.caller.api.post('/v1/calls', body, { headers: { 'content-type': '' } }),
      'unsupported_media_type',
      'content-type must be application/json, got "(none)"',
    );
  });

  it('control: application/json with a charset parameter is accepted', async () => {
    const res = await ringing.caller.api.post('/v1/calls', JSON.stringify(createBody()), {
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    expectJson(res, 201);
  });
});

describe('POST /v1/calls/{id}/answer, /end, /media-session and GET /v1/calls/{id}', () => {
  it('invalid JSON → 400 on answer, end and media-session', async () => {
    for (const action of ['answer', 'end', 'media-session']) {
      await rejects(() => ringing.callee.api.post(`/v1/calls/${ringing.callId}/${action}`, '{"operationId":'), 'invalid_request', /^request body is not valid JSON: /);
    }
  });

  it('answer: missing or wrong installationId / operationId / expectedRevision → 400', async () => {
    const callee = ringing.callee;
    const path = `/v1/calls/${ringing.callId}/answer`;
    const good = { operationId: uid('op'), installationId: callee.installationId };
    const cases: [Record<string, unknown>, string | RegExp][] = [
      [{ operationId: good.operationId }, 'installationId: Invalid input: expected string, received undefined'],
      [{ installationId: good.installationId }, 'operationId: Invalid input: expected string, received undefined'],
      [{ ...good, installationId: 42 }, 'installationId: Invalid input: expected string, received number'],
      [{ ...good, expectedRevision: 1 }, 'expectedRevision: Invalid input: expected string, received number'],
      [{ ...good, expectedRevision: '0' }, 'expectedRevision: must be a positive decimal string'],
      [{ ...good, expectedRevision: '01' }, 'expectedRevision: must be a positive decimal string'],
      [{ ...good, expectedRevision: '-1' }, 'expectedRevision: must be a positive decimal string'],
      [{ ...good, expectedRevision: 'one' }, 'expectedRevision: must be a positive decimal string'],
      [{ ...good, expectedRevision: '1'.repeat(19) }, 'expectedRevision: must be a positive decimal string'],
      [{ ...good, operationId: 'bad op' }, 'operationId: must be 1 to 128 characters of A-Z a-z 0-9 . _ ~ : -'],
    ];
    for (const [body, detail] of cases) await rejects(() => callee.api.post(path, body), 'invalid_request', detail);
  });

  it('end: missing or unknown reason → 400', async () => {
    const path = `/v1/calls/${ringing.callId}/end`;
    const cases: [Record<string, unknown>, string | RegExp][] = [
      [{ operationId: uid('op') }, /^reason: Invalid option: expected one of "localHangup"\|"declined"\|/],
      [{ operationId: uid('op'), reason: 'hungUp' }, /^reason: Invalid option: expected one of /],
      [{ operationId: uid('op'), reason: 'LOCALHANGUP' }, /^reason: Invalid option: expected one of /],
      [{ operationId: uid('op'), reason: 3 }, /^reason: Invalid option: expected one of /],
      [{ reason: 'declined' }, 'operationId: Invalid input: expected string, received undefined'],
    ];
    for (const [body, detail] of cases) await rejects(() => ringing.callee.api.post(path, body), 'invalid_request', detail);
    // Not on an accepted call either.
    await rejects(() => accepted.caller.api.post(`/v1/calls/${accepted.callId}/end`, { operationId: uid('op'), reason: 'bye' }), 'invalid_request', /^reason: /);
  });

  it('media-session: an invalid operationId → 400; wrong content type → 415', async () => {
    const path = `/v1/calls/${accepted.callId}/media-session`;
    await rejects(() => accepted.caller.api.post(path, { operationId: 'bad op' }), 'invalid_request', 'operationId: must be 1 to 128 characters of A-Z a-z 0-9 . _ ~ : -');
    await rejects(() => accepted.caller.api.post(path, '{}', { headers: { 'content-type': 'text/plain' } }), 'unsupported_media_type', 'content-type must be application/json, got "text/plain"');
  });

  it('answer and end: wrong content type → 415, oversized → 413', async () => {
    for (const action of ['answer', 'end']) {
      const path = `/v1/calls/${ringing.callId}/${action}`;
      await rejects(
        () => ringing.callee.api.post(path, JSON.stringify({ operationId: uid('op'), reason: 'declined', installationId: ringing.callee.installationId }), { headers: { 'content-type': 'text/plain' } }),
        'unsupported_media_type',
        'content-type must be application/json, got "text/plain"',
      );
      await rejects(() => oversized('POST', path, ringing.callee.token, 'x'.repeat(LIMIT + 1)), 'payload_too_large', `request body is ${LIMIT + 1} bytes; the limit is ${LIMIT}`);
    }
  });

  it('an invalid call ID in the path → 400 on every call endpoint', async () => {
    const sends = (id: string) => [
      () => ringing.caller.api.get(`/v1/calls/${id}`),
      () => ringing.callee.api.post(`/v1/calls/${id}/answer`, { operationId: uid('op'), installationId: ringing.callee.installationId }),
      () => ringing.callee.api.post(`/v1/calls/${id}/end`, { operationId: uid('op'), reason: 'declined' }),
      () => ringing.callee.api.post(`/v1/calls/${id}/media-session`, {}),
    ];
    for (const send of sends('a%20b')) await rejects(send, 'invalid_request', 'path parameter id: must be 1 to 128 characters of A-Z a-z 0-9 . _ ~ : -');
    for (const send of sends('x'.repeat(129))) await rejects(send, 'invalid_request', 'path parameter id: must be 1 to 128 characters of A-Z a-z 0-9 . _ ~ : -');
    for (const send of sends('%ZZ')) await rejects(send, 'invalid_request', 'path parameter id is not valid percent-encoding');
  });
});

describe('routes and methods', () => {
  it('unknown routes → 404', async () => {
    const cases: [string, string][] = [
      ['GET', '/'],
      ['GET', '/v1/nope'],
      ['GET', '/v2/calls/abc'],
      ['POST', '/v1/calls/abc/answer/extra'],
      ['POST', '/v1/calls/abc/transfer'],
      ['PUT', `/v1/installations/${ringing.callee.installationId}/push-tokens`],
      ['DELETE', '/v1/call'],
    ];
    for (const [method, path] of cases) {
      await rejects(() => ringing.caller.api.request(method, path), 'not_found', `no route for ${method} ${path}`);
    }
  });

  it('wrong methods → 405 with an allow header', async () => {
    const iid = ringing.callee.installationId;
    const cases: [string, string, string][] = [
      ['DELETE', '/v1/calls', 'GET, POST'],
      ['PUT', '/v1/calls', 'GET, POST'],
      ['POST', `/v1/calls/${ringing.callId}`, 'GET'],
      ['DELETE', `/v1/calls/${ringing.callId}`, 'GET'],
      ['GET', `/v1/calls/${ringing.callId}/answer`, 'POST'],
      ['PUT', `/v1/calls/${ringing.callId}/end`, 'POST'],
      ['GET', `/v1/calls/${ringing.callId}/media-session`, 'POST'],
      ['POST', `/v1/installations/${iid}/push-tokens/iosVoip`, 'PUT, DELETE'],
      ['GET', `/v1/installations/${iid}/push-tokens/androidPush`, 'PUT, DELETE'],
      ['PATCH', `/v1/installations/${iid}/push-tokens/iosVoip`, 'PUT, DELETE'],
      ['POST', '/v1/call-events', 'GET'],
      ['GET', '/v1/server/calls/x/end', 'POST'],
      ['POST', '/v1/server/users/u', 'DELETE'],
    ];
    for (const [method, path, allow] of cases) {
      const res = await rejects(() => ringing.callee.api.request(method, path, method === 'GET' ? undefined : {}), 'method_not_allowed', `${method} is not allowed on ${path}; allowed: ${allow}`);
      expect(res.headers.get('allow'), `${method} ${path}`).toBe(allow);
    }
  });
});

describe('PUT/DELETE /v1/installations/{id}/push-tokens/{kind}', () => {
  const path = (kind: string) => `/v1/installations/${ringing.callee.installationId}/push-tokens/${kind}`;

  it('invalid push token kinds → 400', async () => {
    for (const kind of ['apns', 'voip', 'fcm', 'IOSVOIP', 'ios-voip', 'androidpush']) {
      const detail = 'path parameter kind: Invalid option: expected one of "iosVoip"|"androidPush"|"iosAlert"';
      await rejects(() => ringing.callee.api.put(path(kind), { token: HEX_TOKEN, appId: 'com.example.app', iosEnvironment: 'production' }), 'invalid_request', detail);
      await rejects(() => ringing.callee.api.del(path(kind)), 'invalid_request', detail);
    }
  });

  it('iosEnvironment missing for iosVoip → 400', async () => {
    await rejects(
      () => ringing.callee.api.put(path('iosVoip'), { token: HEX_TOKEN, appId: 'com.example.app' }),
      'invalid_request',
      'iosEnvironment: required for iosVoip tokens ("production" or "development")',
    );
  });

  it('iosEnvironment present for androidPush → 400', async () => {
    for (const iosEnvironment of ['production', 'development']) {
      await rejects(
        () => ringing.callee.api.put(path('androidPush'), { token: 'fcm-token-123456', appId: 'com.example.app', iosEnvironment }),
        'invalid_request',
        'iosEnvironment: not allowed for androidPush tokens',
      );
    }
  });

  it('bad token, appId or iosEnvironment values → 400 naming the field', async () => {
    const cases: [string, Record<string, unknown>, string | RegExp][] = [
      ['iosVoip', { token: HEX_TOKEN, appId: 'com.example.app', iosEnvironment: 'sandbox' }, /^iosEnvironment: Invalid option: expected one of "production"\|"development"$/],
      ['iosVoip', { appId: 'com.example.app', iosEnvironment: 'production' }, 'token: Invalid input: expected string, received undefined'],
      ['androidPush', { token: 'short', appId: 'com.example.app' }, 'token: must be 8 to 4096 printable ASCII characters'],
      ['androidPush', { token: 'has a space in it', appId: 'com.example.app' }, 'token: must be 8 to 4096 printable ASCII characters'],
      ['androidPush', { token: 'x'.repeat(4097), appId: 'com.example.app' }, 'token: must be 8 to 4096 printable ASCII characters'],
      ['iosVoip', { token: 'not-hex-'.repeat(10), appId: 'com.example.app', iosEnvironment: 'production' }, 'token: an iosVoip token is the device token in hexadecimal (at least 64 digits)'],
      ['iosVoip', { token: 'ab'.repeat(20), appId: 'com.example.app', iosEnvironment: 'production' }, 'token: an iosVoip token is the device token in hexadecimal (at least 64 digits)'],
      ['androidPush', { token: 'fcm-token-123456', appId: 'com example app' }, 'appId: must be an app bundle ID or package name'],
      ['androidPush', { token: 'fcm-token-123456' }, 'appId: Invalid input: expected string, received undefined'],
      ['androidPush', { token: 12345678, appId: 'com.example.app' }, 'token: Invalid input: expected string, received number'],
    ];
    for (const [kind, body, detail] of cases) await rejects(() => ringing.callee.api.put(path(kind), body), 'invalid_request', detail);
  });

  it('invalid JSON, wrong content type and oversized bodies', async () => {
    await rejects(() => ringing.callee.api.put(path('androidPush'), '{"token":'), 'invalid_request', /^request body is not valid JSON: /);
    await rejects(
      () => ringing.callee.api.put(path('androidPush'), JSON.stringify({ token: 'fcm-token-123456', appId: 'a' }), { headers: { 'content-type': 'text/plain' } }),
      'unsupported_media_type',
      'content-type must be application/json, got "text/plain"',
    );
    await rejects(() => oversized('PUT', path('androidPush'), ringing.callee.token, 'x'.repeat(LIMIT + 1)), 'payload_too_large', `request body is ${LIMIT + 1} bytes; the limit is ${LIMIT}`);
  });
});
