import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import WebSocket from 'ws';
import { keys } from '../../src/redis/keys.js';
import { newServerKey } from '../../src/auth/serverKeys.js';
import { claims, hmacJwt, tokenFor } from './tokens.js';
import { TEST_JWT_SECRET } from './tokens.js';
import { MESSAGE_MAX_BYTES } from '../../src/config/messageLimits.js';

/**
 * Property-based fuzzing of the HTTP API and the signaling socket (docs/operations.md "Operations"): requests
 * built from every route with arbitrary and near-valid parts. The properties: no 5xx, every error
 * an RFC 9457 problem (application/problem+json with type, title, status, detail, code), and a
 * refused request (other than a recorded 409 outcome, see checkRequest) changes nothing in Redis (DEBUG DIGEST of the whole dataset, taken around each
 * request; the server under test runs without a worker, so nothing else writes meanwhile, and
 * the abuse limits are off, so no rate-limit counter moves either).
 */

/** CALL_SHARDS of the server under fuzz (its default). */
export const FUZZ_SHARDS = 8;

const USER = `fuzz-${randomUUID().slice(0, 8)}`;
const INSTALLATION = `${USER}-phone`;
const OTHER = `fuzz-other-${randomUUID().slice(0, 8)}`;

/** Identifiers: valid ones, the ones the server knows, and hostile strings. */
const idArb = fc.oneof(
  fc.constantFrom(USER, INSTALLATION, OTHER, randomUUID(), 'iosVoip', 'androidPush', ''),
  fc.stringMatching(/^[A-Za-z0-9._~:-]{1,140}$/),
  fc.string({ maxLength: 200 }),
  fc.constantFrom('%00', '..', '%2F', '{u:x}', '\u0000', 'a'.repeat(129), '😀', '<script>'),
);

const VALID_TOKEN = tokenFor({ userId: USER, installationId: INSTALLATION, name: 'Fuzz' });
/** The server API key of the fuzz server (FUZZ_SERVER_ENV): the valid credential of /v1/server/ routes. */
const SERVER_KEY = newServerKey();
export const FUZZ_SERVER_ENV = { SERVER_API_KEYS: SERVER_KEY.hash };
/** A third user, the fuzz user's fellow invitee in group calls (docs/group-calls.md). */
const THIRD = `fuzz-third-${randomUUID().slice(0, 8)}`;

/**
 * Calls the fuzz user may act on: created by `seedCalls` before the run (as caller and as
 * callee); every other pair of them a group call (with OTHER and THIRD), so joins, receipts,
 * invites and ends for all reach real group calls too.
 */
export const KNOWN_CALLS = Array.from({ length: 12 }, () => randomUUID());

/** Creates KNOWN_CALLS: half from the fuzz user, half to it (so answers, ends and renames can succeed). */
export async function seedCalls(baseUrl: string): Promise<void> {
  for (const [i, callId] of KNOWN_CALLS.entries()) {
    const asCaller = i % 2 === 0;
    const group = i % 4 >= 2;
    const token = asCaller ? VALID_TOKEN : tokenFor({ userId: OTHER, installationId: `${OTHER}-phone` });
    const callee = asCaller ? OTHER : USER;
    const res = await fetch(`${baseUrl}/v1/calls`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ callId, ...(group ? { calleeUserIds: [callee, THIRD], title: 'Fuzz group' } : { calleeUserId: callee }), operationId: randomUUID() }),
    });
    if (res.status !== 201) throw new Error(`seed call: ${res.status} ${await res.text()}`);
  }
}

const tokenArb = fc.oneof(
  fc.constant(tokenFor({ userId: USER, installationId: INSTALLATION, name: 'Fuzz' })),
  fc.constant(tokenFor({ userId: OTHER, installationId: `${OTHER}-phone` })),
  fc.constant(hmacJwt('HS256', TEST_JWT_SECRET, claims({ userId: USER, installationId: INSTALLATION }, -60))),
  fc.constant(hmacJwt('HS256', 'another-secret-0123456789abcdef-0123456789', claims({ userId: USER, installationId: INSTALLATION }))),
  fc.constant(SERVER_KEY.key),
  fc.constant(newServerKey().key),
  fc.string({ maxLength: 300 }),
  fc.constant(''),
);

/** A body: arbitrary JSON, or a valid body for some route with one part broken. */
const validBodies = (callee: string) => [
  { callId: randomUUID(), calleeUserId: callee, operationId: randomUUID(), video: true },
  { operationId: randomUUID(), installationId: INSTALLATION },
  { operationId: randomUUID(), reason: 'localHangup' },
  { operationId: randomUUID(), displayName: 'Name' },
  // Group calls (docs/group-calls.md): a create, a late invite, a ringing receipt, an end for all.
  { callId: randomUUID(), calleeUserIds: [callee, THIRD], title: 'Standup', operationId: randomUUID() },
  { operationId: randomUUID(), userIds: [callee, THIRD] },
  { operationId: randomUUID(), via: 'socket' },
  { operationId: randomUUID(), reason: 'localHangup', forAll: true },
  { operationId: randomUUID(), payload: { sdp: 'v=0' } },
  { token: 'a'.repeat(64), appId: 'com.example.app', iosEnvironment: 'production' },
  {},
];
const nearValidArb = fc
  .tuple(fc.constantFrom(...validBodies(OTHER)), fc.nat(), fc.jsonValue(), fc.constantFrom('drop', 'replace', 'add', 'long'))
  .map(([body, pick, value, how]) => {
    const out: Record<string, unknown> = { ...body };
    const keys = Object.keys(out);
    const key = keys.length > 0 ? keys[pick % keys.length]! : 'x';
    if (how === 'drop') delete out[key];
    else if (how === 'replace') out[key] = value;
    else if (how === 'add') out[`extra${pick % 5}`] = value;
    else out[key] = 'x'.repeat(2000 + (pick % 20_000));
    return JSON.stringify(out);
  });
const bodyArb = fc.oneof(
  nearValidArb,
  fc.json({ maxDepth: 4 }),
  fc.string({ maxLength: 500 }),
  fc.constant(''),
  fc.constant('{"a":'),
  fc.constant('x'.repeat(17_000)),
);

const pathArb = fc.oneof(
  fc.tuple(idArb, fc.constantFrom('answer', 'end', 'rename', 'media-session', 'messages', 'invite', 'ringing', '')).map(([id, op]) => `/v1/calls/${encodeURIComponent(id)}${op ? `/${op}` : ''}`),
  fc.tuple(idArb, idArb).map(([inst, kind]) => `/v1/installations/${encodeURIComponent(inst)}/push-tokens/${encodeURIComponent(kind)}`),
  fc.tuple(fc.string({ maxLength: 80 }), fc.integer({ min: -5, max: 1000 })).map(([cursor, limit]) => `/v1/call-events?cursor=${encodeURIComponent(cursor)}&limit=${limit}`),
  fc.constantFrom('/v1/calls', '/v1/call-events', '/v1/calls/x/messages?afterSeq=-1', '/v1/calls/x/messages?afterSeq=abc', '/v1/openapi.json', '/healthz', '/readyz', '/nope', '/v1/'),
);

export interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string | undefined;
}

/** Each route with its method and a valid body (docs/api.md "API"): the base a request is mutated from. */
const ROUTES: { method: string; path: (callId: string) => string; body: () => object | undefined; token?: string }[] = [
  { method: 'POST', path: () => '/v1/calls', body: () => ({ callId: randomUUID(), calleeUserId: OTHER, operationId: randomUUID(), video: false }) },
  { method: 'POST', path: (id) => `/v1/calls/${id}/answer`, body: () => ({ operationId: randomUUID(), installationId: INSTALLATION }) },
  { method: 'POST', path: (id) => `/v1/calls/${id}/end`, body: () => ({ operationId: randomUUID(), reason: 'localHangup' }) },
  { method: 'POST', path: (id) => `/v1/calls/${id}/rename`, body: () => ({ operationId: randomUUID(), displayName: 'Name' }) },
  { method: 'POST', path: () => '/v1/calls', body: () => ({ callId: randomUUID(), calleeUserIds: [OTHER, THIRD], title: 'Standup', operationId: randomUUID() }) },
  // Twice each: only the known group calls take them (a third of those the fuzz user is in).
  ...[1, 2].flatMap(() => [
    { method: 'POST', path: (id: string) => `/v1/calls/${id}/invite`, body: () => ({ operationId: randomUUID(), userIds: [THIRD] }) },
    { method: 'POST', path: (id: string) => `/v1/calls/${id}/ringing`, body: () => ({ operationId: randomUUID(), via: 'fcm' }) },
  ]),
  { method: 'POST', path: (id) => `/v1/calls/${id}/end`, body: () => ({ operationId: randomUUID(), reason: 'localHangup', forAll: true }) },
  { method: 'POST', path: (id) => `/v1/calls/${id}/media-session`, body: () => ({}) },
  { method: 'POST', path: (id) => `/v1/calls/${id}/messages`, body: () => ({ operationId: randomUUID(), payload: { sdp: 'v=0' } }) },
  { method: 'GET', path: (id) => `/v1/calls/${id}/messages?afterSeq=0`, body: () => undefined },
  { method: 'GET', path: (id) => `/v1/calls/${id}`, body: () => undefined },
  { method: 'GET', path: () => '/v1/call-events?limit=10', body: () => undefined },
  { method: 'PUT', path: () => `/v1/installations/${INSTALLATION}/push-tokens/iosVoip`, body: () => ({ token: 'ab'.repeat(32), appId: 'com.example.app', iosEnvironment: 'production' }) },
  { method: 'PUT', path: () => `/v1/installations/${INSTALLATION}/push-tokens/androidPush`, body: () => ({ token: `fcm-${randomUUID()}`, appId: 'com.example.app' }) },
  { method: 'DELETE', path: () => `/v1/installations/${INSTALLATION}/push-tokens/androidPush`, body: () => undefined },
  { method: 'GET', path: () => '/v1/calls?limit=5', body: () => undefined },
  // The server API (docs/server-api.md), with its own credential.
  ...[
    { method: 'POST', path: (id: string) => `/v1/server/calls/${id}/end`, body: () => ({ reason: 'remoteEnded' }) },
    { method: 'GET', path: (id: string) => `/v1/server/calls/${id}`, body: () => undefined },
    { method: 'GET', path: (id: string) => `/v1/server/users/${id}/calls?limit=5&missed=true`, body: () => undefined },
    { method: 'GET', path: () => `/v1/server/users/${USER}/calls/active`, body: () => undefined },
    { method: 'POST', path: (id: string) => `/v1/server/users/${OTHER}/installations/${id}/sign-out`, body: () => undefined },
    { method: 'DELETE', path: (id: string) => `/v1/server/users/${id}`, body: () => undefined },
    { method: 'GET', path: () => '/v1/server/webhooks/endpoints', body: () => undefined },
    { method: 'POST', path: (id: string) => `/v1/server/webhooks/endpoints/${id}/enable`, body: () => undefined },
    { method: 'GET', path: () => '/v1/server/webhooks/dead-letters?limit=3', body: () => undefined },
    { method: 'POST', path: (id: string) => `/v1/server/webhooks/dead-letters/${id}/replay`, body: () => undefined },
  ].map((r) => ({ ...r, token: SERVER_KEY.key })),
];

/** `arb` one time in `1 + keep`, else undefined (keep the valid part). */
function sometimes<T>(arb: fc.Arbitrary<T>, keep: number): fc.Arbitrary<T | undefined> {
  return fc.oneof({ arbitrary: fc.constant(undefined), weight: keep }, { arbitrary: arb, weight: 1 });
}

/** A valid request to a route with, often, one or more of its parts broken. */
const routeRequestArb = fc
  .record({
    route: fc.constantFrom(...ROUTES),
    /** Calls created earlier in the run are reused, so answer/end/rename reach real calls. */
    callId: fc.oneof(fc.constantFrom(...KNOWN_CALLS), idArb),
    method: sometimes(fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'), 4),
    path: sometimes(pathArb, 4),
    token: sometimes(tokenArb, 2),
    contentType: sometimes(fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', '', 'application/jsonx', 'application/json; charset=utf-8'), 4),
    body: sometimes(bodyArb, 2),
    requestId: sometimes(fc.string({ maxLength: 200 }), 3),
  })
  .map(({ route, callId, method, path, token, contentType, body, requestId }) => {
    const headers: Record<string, string> = {};
    // Header values must be Latin-1 without control characters to be sent at all.
    const clean = (v: string) => v.replace(/[^\x20-\x7e]/g, '?');
    headers.authorization = `Bearer ${clean(token ?? route.token ?? VALID_TOKEN)}`;
    const valid = route.body();
    if (valid !== undefined || body !== undefined) headers['content-type'] = contentType ?? 'application/json';
    if (requestId !== undefined) headers['x-request-id'] = clean(requestId);
    const m = method ?? route.method;
    const payload = body ?? (valid === undefined ? undefined : JSON.stringify(valid));
    return { method: m, path: path ?? route.path(encodeURIComponent(callId)), headers, body: m === 'GET' || m === 'OPTIONS' ? undefined : payload };
  });

export const requestArb: fc.Arbitrary<FuzzRequest> = routeRequestArb;

/** Which group call route a request is (a group create, a late invite, a ringing receipt), if one. */
export function groupRoute(req: FuzzRequest): 'create' | 'invite' | 'ringing' | undefined {
  if (req.method !== 'POST') return undefined;
  if (req.path === '/v1/calls') return req.body?.includes('"calleeUserIds"') ? 'create' : undefined;
  const op = /^\/v1\/calls\/[^/]+\/(invite|ringing)$/.exec(req.path)?.[1];
  return op as 'invite' | 'ringing' | undefined;
}

/** Status counts of a run, for the report. */
export type Distribution = Map<number, number>;

/**
 * No worker runs under fuzz, so the outbox only grows: emptied after a change, which keeps the
 * digest (a hash over the whole dataset) cheap through long runs.
 */
export async function trimOutboxes(redis: Redis): Promise<void> {
  await Promise.all(Array.from({ length: FUZZ_SHARDS }, (_, i) => redis.xtrim(keys.outboxForShard({ prefix: 'cb', shards: FUZZ_SHARDS }, i), 'MAXLEN', 0)));
}

/**
 * Sends one request and checks the HTTP properties; returns the status. `digest` carries the
 * dataset's digest from one request to the next (nothing else writes in between), so each
 * request costs one DEBUG DIGEST.
 */
export async function checkRequest(baseUrl: string, redis: Redis, req: FuzzRequest, digest: { value?: string }): Promise<number> {
  const before = (digest.value ??= (await redis.call('DEBUG', 'DIGEST')) as string);
  const res = await fetch(baseUrl + req.path, { method: req.method, headers: req.headers, body: req.body });
  const text = await res.text();
  const where = `${req.method} ${req.path} ${JSON.stringify(req.headers)} ${String(req.body).slice(0, 300)} → ${res.status} ${text.slice(0, 300)}`;
  // The one 5xx a well-formed request may get here: a group call's media session on a server with
  // no SFU configured, as the fuzz server is (docs/api.md "Media session"). It changes nothing.
  const noSfu = res.status === 503 && req.path.endsWith('/media-session') && text.includes('"code":"sfu_unavailable"') && !res.headers.has('retry-after');
  if (res.status >= 500 && !noSfu) throw new Error(`5xx: ${where}`);
  if (res.status >= 400) {
    if (res.headers.get('content-type') !== 'application/problem+json') throw new Error(`not problem+json: ${where}`);
    const problem = JSON.parse(text) as Record<string, unknown>;
    for (const field of ['type', 'title', 'status', 'detail', 'code']) {
      if (problem[field] === undefined) throw new Error(`problem without ${field}: ${where}`);
    }
    if (problem.status !== res.status) throw new Error(`problem status ${String(problem.status)} differs: ${where}`);
    // A 409 is the decided outcome of a well-formed request about a call's state (answered
    // elsewhere, ended, revision moved): it is recorded under its operationId so a retry gets the
    // same answer (docs/api.md "Idempotency"), and a ringing call past its deadline is ended by
    // whichever request touches it first (lazy expiry). Every other refusal changes nothing.
  }
  if (res.status < 400) await trimOutboxes(redis);
  digest.value = (await redis.call('DEBUG', 'DIGEST')) as string;
  if (res.status >= 400 && res.status !== 409 && digest.value !== before) throw new Error(`a refused request changed Redis: ${where}`);
  return res.status;
}

/** Command frames (docs/signaling.md "Commands"): a route's body with one part broken, on a known call or any ID. */
const COMMAND_BODIES: Record<string, () => object> = {
  answer: () => ({ operationId: randomUUID(), installationId: INSTALLATION }),
  end: () => ({ operationId: randomUUID(), reason: 'localHangup' }),
  rename: () => ({ operationId: randomUUID(), displayName: 'Name' }),
  invite: () => ({ operationId: randomUUID(), userIds: [THIRD] }),
  ringing: () => ({ operationId: randomUUID(), via: 'apns' }),
  message: () => ({ operationId: randomUUID(), payload: { sdp: 'v=0' } }),
};
const commandFrameArb = fc
  .tuple(
    fc.constantFrom(...Object.keys(COMMAND_BODIES)),
    fc.oneof({ arbitrary: fc.constantFrom(...KNOWN_CALLS), weight: 3 }, idArb),
    fc.option(nearValidArb, { freq: 2 }),
  )
  .map(([type, callId, broken]) => {
    // Its own valid body, or a body of any route with one part broken.
    const body = broken === null ? COMMAND_BODIES[type]!() : (JSON.parse(broken) as object);
    return { data: JSON.stringify({ type, callId, ...body }) as string | Buffer, binary: false };
  });

/** WebSocket frames: text (valid JSON, broken JSON, arbitrary), command frames, and binary. */
export const frameArb = fc.oneof(
  { arbitrary: commandFrameArb, weight: 4 },
  fc.json({ maxDepth: 3 }).map((s) => ({ data: s as string | Buffer, binary: false })),
  fc.string({ maxLength: 300 }).map((s) => ({ data: s as string | Buffer, binary: false })),
  fc.constantFrom('{"type":"ping"}', '{"type":"message"}', '{"type":"message","callId":"x","operationId":"y","payload":{}}', '{"type":', '').map((s) => ({ data: s as string | Buffer, binary: false })),
  fc.uint8Array({ maxLength: 300 }).map((b) => ({ data: Buffer.from(b) as string | Buffer, binary: true })),
  // Text frames that are not UTF-8, and frames over WS_MAX_MESSAGE_BYTES.
  fc.uint8Array({ minLength: 1, maxLength: 50 }).map((b) => ({ data: Buffer.concat([Buffer.from([0xff]), Buffer.from(b)]) as string | Buffer, binary: false })),
  fc.integer({ min: MESSAGE_MAX_BYTES + 1, max: 80_000 }).map((n) => ({ data: `{"type":"ping","pad":"${'x'.repeat(n)}"}` as string | Buffer, binary: false })),
);

/** Codes a signaling socket may be closed with after client frames (docs/signaling.md). */
export const ALLOWED_CLOSE_CODES = new Set([1000, 1002, 1003, 1005, 1006, 1007, 1008, 1009, 4029]);

/** Opens a socket for the fuzz user, sends the frames, and returns its close code (or undefined if still open). */
export async function sendFrames(
  baseUrl: string,
  frames: { data: string | Buffer; binary: boolean }[],
): Promise<{ closeCode: number | undefined; replies: number; statuses: number[] }> {
  const ws = new WebSocket(`${baseUrl.replace(/^http/, 'ws')}/v1/signaling`, 'calling.v1.json', {
    headers: { authorization: `Bearer ${tokenFor({ userId: USER, installationId: INSTALLATION })}` },
  });
  let closeCode: number | undefined;
  let replies = 0;
  const closed = new Promise<void>((r) => ws.once('close', (code) => ((closeCode = code), r())));
  /** The status of every `reply` frame (the answers to command frames). */
  const statuses: number[] = [];
  ws.on('message', (data: Buffer) => {
    const frame = JSON.parse(data.toString('utf8')) as { type: string; status?: number };
    // Each client frame is answered by one of these (`synced` and events are not answers).
    if (frame.type === 'pong' || frame.type === 'error' || frame.type === 'reply') replies++;
    if (frame.type === 'reply') statuses.push(frame.status!);
  });
  ws.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_q, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
  for (const f of frames) {
    if (ws.readyState !== WebSocket.OPEN) break;
    ws.send(f.data, { binary: f.binary });
  }
  // A ping after the frames: the server answers every frame (commands once they have run), so
  // once it has answered them all and the ping, nothing else is coming (or the socket closed).
  if (ws.readyState === WebSocket.OPEN) ws.send('{"type":"ping"}');
  const answeredAll = new Promise<void>((r) => {
    const check = () => (replies >= frames.length + 1 ? r() : undefined);
    ws.on('message', check);
    check();
  });
  await Promise.race([closed, answeredAll, new Promise((r) => setTimeout(r, 3000))]);
  if (ws.readyState === WebSocket.OPEN) {
    ws.close(1000);
    await closed;
    return { closeCode: undefined, replies, statuses };
  }
  return { closeCode, replies, statuses };
}
