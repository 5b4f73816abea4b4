import { request as httpRequest } from 'node:http';
import { describe, expect, it } from 'vitest';
import { unpack } from 'msgpackr';
import { stackForFile } from '../support/stack.js';
import { end, uid } from '../support/fixtures.js';
import { TEST_JWT_SECRET, claims, hmacJwt, tokenFor } from '../support/tokens.js';
import { connect, upgradeStatus, UpgradeRejected, type SignalingClient } from '../support/ws-client.js';
import { Sockets, createCall, online, settleByBarrier, user } from './helpers.js';
import { MESSAGE_MAX_BYTES } from '../../src/config/messageLimits.js';

/**
 * The WebSocket protocol itself (docs/signaling.md): authentication before the upgrade, the two
 * encodings, and the client frames.
 */

let url: string;
const sockets = Sockets.closedAfterEachTest();

stackForFile({}, (s) => (url = s.url));

function expectRefused(outcome: UpgradeRejected | SignalingClient, status: number): UpgradeRejected {
  if (!(outcome instanceof UpgradeRejected)) {
    sockets.track(outcome);
    throw new Error(`the upgrade was accepted (protocol ${outcome.protocol}); expected HTTP ${status}`);
  }
  expect(outcome.status).toBe(status);
  expect(outcome.headers['content-type']).toBe('application/problem+json');
  // The same writer as every route's refusal: a request ID comes back with it.
  expect(outcome.headers['x-request-id']).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
  const body = JSON.parse(outcome.body) as Record<string, unknown>;
  expect(body.status).toBe(status);
  expect(body.code).toBe(status === 401 ? 'unauthorized' : 'invalid_request');
  return outcome;
}

/** A raw upgrade request: the status line and headers the server answered with. */
function rawUpgrade(path: string, headers: Record<string, string>): Promise<{ status: number; upgraded: boolean; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, {
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': Buffer.from(uid('k').slice(0, 16)).toString('base64'),
        ...headers,
      },
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, upgraded: true, headers: res.headers });
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, upgraded: false, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('authentication before the upgrade', () => {
  const id = () => ({ userId: uid('user'), installationId: uid('inst') });

  it('no token → 401, never an open socket', async () => {
    expectRefused(await upgradeStatus(url, undefined), 401);
    const raw = await rawUpgrade('/v1/signaling', {});
    expect(raw).toMatchObject({ status: 401, upgraded: false });
  });

  it('a bad token (garbage, wrong signature, missing iid, alg none) → 401', async () => {
    const who = id();
    const bad = [
      'not-a-jwt',
      hmacJwt('HS256', 'another-secret-0123456789abcdef-0123456789', claims(who)),
      hmacJwt('HS256', TEST_JWT_SECRET, { sub: who.userId, exp: Math.floor(Date.now() / 1000) + 3600 }),
      `${tokenFor(who).split('.').slice(0, 2).join('.')}.`,
    ];
    for (const token of bad) {
      const refused = expectRefused(await upgradeStatus(url, token), 401);
      expect(refused.body).toContain('"code":"unauthorized"');
      expectRefused(await upgradeStatus(url, token, { tokenIn: 'query' }), 401);
    }
    const raw = await rawUpgrade('/v1/signaling', { authorization: 'Bearer not-a-jwt' });
    expect(raw).toMatchObject({ status: 401, upgraded: false });
  });

  it('an expired token → 401 with detail "token expired"', async () => {
    const expired = hmacJwt('HS256', TEST_JWT_SECRET, claims(id(), -10));
    const refused = expectRefused(await upgradeStatus(url, expired), 401);
    expect(JSON.parse(refused.body).detail).toBe('token expired');
    expectRefused(await upgradeStatus(url, expired, { tokenIn: 'query' }), 401);
  });

  it('a malformed cursor → 400 (after a valid token)', async () => {
    expectRefused(await upgradeStatus(url, tokenFor(id()), { cursor: 'not a cursor' }), 400);
  });

  it('?access_token= works like the header: the socket opens and receives the device’s events', async () => {
    const [caller] = user(url, 1);
    const [callee] = user(url, 1);
    const ws = sockets.track(await connect(url, callee!.token, { tokenIn: 'query', name: 'query-token' }));
    expect(ws.protocol).toBe('calling.v1.json');
    const call = await createCall(caller!, callee!.userId);
    const [e] = await ws.waitForEvents(1);
    expect(e!.callId).toBe(call.callId);
  });
});

describe('encodings', () => {
  it('msgpack and JSON clients of the same user receive identical frames', async () => {
    const [caller] = user(url, 1);
    const callee = user(url, 2);
    const json = sockets.track(await connect(url, callee[0]!.token, { protocol: 'calling.v1.json', name: 'json' }));
    const mp = sockets.track(await connect(url, callee[1]!.token, { protocol: 'calling.v1.msgpack', name: 'msgpack' }));
    expect(json.protocol).toBe('calling.v1.json');
    expect(mp.protocol).toBe('calling.v1.msgpack');

    const c1 = await createCall(caller!, callee[0]!.userId, { video: true });
    await createCall(caller!, callee[0]!.userId);
    expect((await end(caller!, c1.callId, 'localHangup')).status).toBe(200);
    await Promise.all([json.waitForEvents(3), mp.waitForEvents(3)]);

    // Frame by frame: text JSON on one, binary msgpack on the other, decoding to the same value.
    expect(json.raw.every((r) => !r.isBinary)).toBe(true);
    expect(mp.raw.every((r) => r.isBinary)).toBe(true);
    const jsonEvents = json.raw.map((r) => JSON.parse(r.data.toString('utf8')) as { type: string }).filter((f) => f.type === 'event');
    const mpEvents = mp.raw.map((r) => unpack(r.data) as { type: string }).filter((f) => f.type === 'event');
    // Each event from the log, and (on a single Redis) its early copy before it, without a cursor.
    expect(mpEvents.filter((f) => 'cursor' in f)).toHaveLength(3);
    expect(mpEvents).toEqual(jsonEvents);
    // Integers stay integers, booleans booleans, the revision a string.
    const invited = (mpEvents.find((f) => 'cursor' in f) as unknown as { event: Record<string, unknown> }).event;
    expect(Number.isSafeInteger(invited.expiresAtMs)).toBe(true);
    expect(invited.video).toBe(true);
    expect(invited.revision).toBe('1');
    // The `synced` frame is msgpack too.
    expect(unpack(mp.raw[0]!.data)).toMatchObject({ type: 'synced', cursor: expect.any(String) });
  });

  it('without a subprotocol the server speaks JSON and echoes none', async () => {
    const [d] = user(url, 1);
    const ws = sockets.track(await connect(url, d!.token, { protocol: 'none', name: 'no-protocol' }));
    expect(ws.protocol).toBe('');
    expect(ws.raw[0]!.isBinary).toBe(false);
    expect(JSON.parse(ws.raw[0]!.data.toString('utf8'))).toMatchObject({ type: 'synced' });
  });
});

describe('client frames', () => {
  it('{"type":"ping"} gets {"type":"pong"} (JSON and msgpack)', async () => {
    const [d] = user(url, 1);
    const ws = sockets.track(await connect(url, d!.token, { name: 'pinger' }));
    ws.send({ type: 'ping' });
    const pong = await ws.next('pong');
    expect(pong).toEqual({ type: 'pong' });
    expect(ws.raw.at(-1)!.data.toString('utf8')).toBe('{"type":"pong"}');

    const mp = sockets.track(await connect(url, d!.token, { protocol: 'calling.v1.msgpack', name: 'msgpack-pinger' }));
    const { pack } = await import('msgpackr');
    mp.ws.send(pack({ type: 'ping' }), { binary: true });
    expect(await mp.next('pong')).toEqual({ type: 'pong' });
    expect(mp.raw.at(-1)!.isBinary).toBe(true);
  });

  it('a frame that is not understood gets an error frame and the connection stays open', async () => {
    const [d] = user(url, 1);
    const ws = sockets.track(await connect(url, d!.token, { name: 'confused' }));
    ws.ws.send('{"type":"subscribe"}');
    const error = await ws.next('error');
    expect(error).toMatchObject({ type: 'error', code: expect.any(String), detail: expect.any(String) });
    ws.ws.send('not json');
    await ws.next('error');
    ws.send({ type: 'ping' });
    await ws.next('pong');
    expect(ws.closeInfo).toBeUndefined();
  });

  it('a frame over WS_MAX_MESSAGE_BYTES (17 KiB by default) closes the socket with 1009; one just under it is answered', async () => {
    const [d] = user(url, 1);
    const ws = sockets.track(await connect(url, d!.token, { name: 'big-framer' }));
    // Just under the limit: understood (an error frame for the unknown field is fine too).
    ws.ws.send(JSON.stringify({ type: 'ping', pad: 'x'.repeat(MESSAGE_MAX_BYTES - 32) }));
    await ws.next();
    expect(ws.closeInfo).toBeUndefined();
    ws.ws.send(JSON.stringify({ type: 'ping', pad: 'x'.repeat(MESSAGE_MAX_BYTES) }));
    expect(await ws.closed).toEqual({ code: 1009, reason: 'frame too large' });
  });

  it('a text frame that is not valid UTF-8 is dropped by uWebSockets.js without a close frame (1006, as docs/signaling.md says); the server stays up', async () => {
    const [d] = user(url, 1);
    const ws = sockets.track(await connect(url, d!.token, { name: 'bad-utf8' }));
    ws.ws.send(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), { binary: false });
    expect((await ws.closed).code).toBe(1006);
    // Others are unaffected.
    const [other] = user(url, 1);
    const fine = sockets.track(await connect(url, other!.token, { name: 'after-bad-utf8' }));
    fine.ws.send('{"type":"ping"}');
    expect((await fine.next()).type).toBe('pong');
  });

  it('the socket of one user never receives another user’s events', async () => {
    const [caller] = user(url, 1);
    const [bob] = user(url, 1);
    const [eve] = await online(user(url, 1), url);
    sockets.track(eve!.ws);
    const call = await createCall(caller!, bob!.userId);
    // Nothing for Eve, up to a barrier call of hers on the call's outbox shard.
    const [got] = await settleByBarrier(url, call.callId, [[eve!, 0]]);
    expect(got).toEqual([]);
  });
});
