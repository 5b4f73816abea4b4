import { sleep } from '../support/wait.js';
import { within } from '../support/wait.js';
import { randomBytes } from 'node:crypto';
import net, { type AddressInfo } from 'node:net';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ApnsSender } from '../../src/push/apns.js';
import { FcmSender, type AccessTokenSource } from '../../src/push/fcm.js';
import { FCM_SCOPE, parseServiceAccount } from '../../src/push/fcmAccessToken.js';
import { Http2Pool } from '../../src/push/http2Pool.js';
import type { SendResult } from '../../src/push/sendResult.js';
import { makeApnsKey, startFakeApns, type ApnsKey, type ApnsScriptedResponse, type FakeApns } from '../support/apns-server.js';
import { makeServiceAccount, startFakeFcm, type FakeFcm } from '../support/fcm-server.js';

/**
 * The push provider clients against local fake providers that check what the real ones check
 * (headers, JWT signatures and ages, bodies). No Redis and no queues: these are libraries.
 */

const BUNDLE_ID = 'com.example.calls';
const MINUTE = 60_000;

const invitation = {
  schemaVersion: 1,
  type: 'call.invited',
  callId: '0b6f4f0e-6c1c-4a8e-9a53-3f3a2a7f1c11',
  displayName: 'Alice Ünicode',
  handle: 'app:alice',
  eventId: 'evt-1',
  revision: '1',
  issuedAtMs: 1_700_000_000_000,
  expiresAtMs: 1_700_000_045_000,
  video: false,
};

const apnsToken = () => randomBytes(32).toString('hex');

/** No result may carry the device token or a credential. */
function expectNoSecrets(result: SendResult, ...secrets: string[]): void {
  const text = JSON.stringify(result);
  for (const s of secrets) expect(text).not.toContain(s);
}

describe('ApnsSender', () => {
  let key: ApnsKey;
  let production: FakeApns;
  let sandbox: FakeApns;
  let pool: Http2Pool;

  beforeAll(() => {
    key = makeApnsKey();
  });

  beforeEach(async () => {
    const opts = { bundleId: BUNDLE_ID, keyId: key.keyId, teamId: key.teamId, publicKey: key.publicKey };
    [production, sandbox] = await Promise.all([startFakeApns(opts), startFakeApns(opts)]);
    pool = new Http2Pool();
  });

  afterEach(async () => {
    await pool.close();
    await Promise.all([production.close(), sandbox.close()]);
  });

  function sender(overrides: Partial<ConstructorParameters<typeof ApnsSender>[0]> = {}): ApnsSender {
    return new ApnsSender({
      productionUrl: production.url,
      sandboxUrl: sandbox.url,
      keyPem: key.privateKeyPem,
      keyId: key.keyId,
      teamId: key.teamId,
      bundleId: BUNDLE_ID,
      pool,
      timeoutMs: 2_000,
      ...overrides,
    });
  }

  it('sends a VoIP push with exactly the documented headers and body', async () => {
    const token = apnsToken();
    const result = await sender().sendVoip({ token, environment: 'production' }, invitation);

    const [req] = production.requests;
    expect(req).toBeDefined();
    expect(result).toEqual({ ok: true, id: req!.apnsId });
    expect(req!.status).toBe(200);
    expect(req!.method).toBe('POST');
    expect(req!.path).toBe(`/3/device/${token}`);
    const { authorization, ...rest } = req!.headers;
    expect(rest).toEqual({
      'apns-push-type': 'voip',
      'apns-topic': `${BUNDLE_ID}.voip`,
      'apns-priority': '10',
      'apns-expiration': '0',
    });
    expect(authorization).toMatch(/^bearer [\w-]+\.[\w-]+\.[\w-]+$/);
    expect(req!.body).toEqual({ aps: {}, callpayload: invitation });
    expect(req!.jwt!.header).toEqual({ alg: 'ES256', kid: key.keyId });
    expect(Object.keys(req!.jwt!.payload).sort()).toEqual(['iat', 'iss']);
    expect(req!.jwt!.payload.iss).toBe(key.teamId);
    expect(Math.abs(req!.jwt!.payload.iat! - Date.now() / 1000)).toBeLessThan(5);
  });

  it('sends development tokens to the sandbox URL and production tokens to the production URL', async () => {
    const s = sender();
    const devToken = apnsToken();
    const prodToken = apnsToken();
    expect((await s.sendVoip({ token: devToken, environment: 'development' }, invitation)).ok).toBe(true);
    expect(sandbox.requests.map((r) => r.token)).toEqual([devToken]);
    expect(production.requests).toHaveLength(0);

    expect((await s.sendVoip({ token: prodToken, environment: 'production' }, invitation)).ok).toBe(true);
    expect(production.requests.map((r) => r.token)).toEqual([prodToken]);
    expect(sandbox.requests).toHaveLength(1);
  });

  it('serves many pushes with one provider JWT over one HTTP/2 session', async () => {
    const s = sender();
    const results = await Promise.all(Array.from({ length: 10 }, () => s.sendVoip({ token: apnsToken(), environment: 'production' }, invitation)));
    for (let i = 0; i < 10; i++) results.push(await s.sendVoip({ token: apnsToken(), environment: 'production' }, invitation));

    expect(results.every((r) => r.ok)).toBe(true);
    expect(production.requests).toHaveLength(20);
    expect(production.distinctJwts).toBe(1);
    expect(production.sessionsOpened).toBe(1);
    expect(pool.sessionsCreated).toBe(1);
    expect(s.providerToken.tokensSigned).toBe(1);
  });

  it('on 403 ExpiredProviderToken signs a new JWT and retries exactly once', async () => {
    const s = sender();
    const token = apnsToken();
    await s.sendVoip({ token: apnsToken(), environment: 'production' }, invitation);
    production.failNext('*', { status: 403, reason: 'ExpiredProviderToken' });

    const result = await s.sendVoip({ token, environment: 'production' }, invitation);

    expect(result.ok).toBe(true);
    const forToken = production.requests.filter((r) => r.token === token);
    expect(forToken.map((r) => r.status)).toEqual([403, 200]);
    expect(forToken[0]!.headers.authorization).not.toBe(forToken[1]!.headers.authorization);
    expect(production.distinctJwts).toBe(2);
    // The new JWT serves the following pushes.
    await s.sendVoip({ token: apnsToken(), environment: 'production' }, invitation);
    expect(production.distinctJwts).toBe(2);
  });

  it('recovers from a JWT the provider finds genuinely too old', async () => {
    // The first token is signed 70 minutes in the past; the clock is right afterwards.
    let calls = 0;
    const now = () => (calls++ === 0 ? Date.now() - 70 * MINUTE : Date.now());
    const result = await sender({ now }).sendVoip({ token: apnsToken(), environment: 'production' }, invitation);
    expect(result.ok).toBe(true);
    expect(production.requests.map((r) => [r.status, r.reason])).toEqual([
      [403, 'ExpiredProviderToken'],
      [200, undefined],
    ]);
  });

  it('reports the app as misconfigured when the fresh JWT is rejected too, after one retry', async () => {
    const skewed = () => Date.now() - 70 * MINUTE;
    const result = await sender({ now: skewed }).sendVoip({ token: apnsToken(), environment: 'production' }, invitation);
    expect(result).toEqual({ ok: false, kind: 'misconfigured', reason: 'ExpiredProviderToken', status: 403 });
    expect(production.requests).toHaveLength(2);
    expect(production.distinctJwts).toBe(2);
  });

  it('reports a JWT signed with the wrong key as misconfigured (InvalidProviderToken), after one retry', async () => {
    const other = makeApnsKey();
    const result = await sender({ keyPem: other.privateKeyPem }).sendVoip({ token: apnsToken(), environment: 'production' }, invitation);
    expect(result).toEqual({ ok: false, kind: 'misconfigured', reason: 'InvalidProviderToken', status: 403 });
    expect(production.requests).toHaveLength(2);
  });

  it('reports 410 Unregistered (with its timestamp), BadDeviceToken and DeviceTokenNotForTopic as invalidToken', async () => {
    const s = sender();
    const gone = apnsToken();
    const bad = apnsToken();
    const otherTopic = apnsToken();
    production.failNext(gone, { status: 410, reason: 'Unregistered', timestampMs: 1_700_000_000_123 });
    production.setTokenState(bad, 'bad');
    production.failNext(otherTopic, { status: 400, reason: 'DeviceTokenNotForTopic' });

    const results = [
      await s.sendVoip({ token: gone, environment: 'production' }, invitation),
      await s.sendVoip({ token: bad, environment: 'production' }, invitation),
      await s.sendVoip({ token: otherTopic, environment: 'production' }, invitation),
    ];
    expect(results).toEqual([
      { ok: false, kind: 'invalidToken', reason: 'Unregistered', invalidSinceMs: 1_700_000_000_123 },
      { ok: false, kind: 'invalidToken', reason: 'BadDeviceToken' },
      { ok: false, kind: 'invalidToken', reason: 'DeviceTokenNotForTopic' },
    ]);
    expectNoSecrets(results[0]!, gone);
    // Not retried: each token was tried once.
    expect(production.requests).toHaveLength(3);
  });

  it('reports 429 TooManyProviderTokenUpdates as retry and keeps its provider JWT', async () => {
    const s = sender();
    production.failNext('*', { status: 429, reason: 'TooManyProviderTokenUpdates' });
    const throttled = await s.sendVoip({ token: apnsToken(), environment: 'production' }, invitation);
    expect(throttled).toEqual({ ok: false, kind: 'retry', reason: 'TooManyProviderTokenUpdates', status: 429 });
    expect((await s.sendVoip({ token: apnsToken(), environment: 'production' }, invitation)).ok).toBe(true);
    // Signing a new token would be one more update: the same JWT went out both times.
    expect(s.providerToken.tokensSigned).toBe(1);
    expect(production.distinctJwts).toBe(1);
  });

  it('on 503 Shutdown sends once more on a new connection', async () => {
    const s = sender();
    expect((await s.sendVoip({ token: apnsToken(), environment: 'production' }, invitation)).ok).toBe(true);
    const token = apnsToken();
    production.failNext(token, { status: 503, reason: 'Shutdown' });

    const result = await s.sendVoip({ token, environment: 'production' }, invitation);

    expect(result.ok).toBe(true);
    expect(production.requests.filter((r) => r.token === token).map((r) => r.status)).toEqual([503, 200]);
    expect(pool.sessionsCreated).toBe(2);
    expect(production.sessionsOpened).toBe(2);
  });

  it('reports a provider that keeps answering Shutdown as retry, after one reconnect', async () => {
    const token = apnsToken();
    production.failNext(token, { status: 503, reason: 'Shutdown', retryAfterSeconds: 3 });
    production.failNext(token, { status: 503, reason: 'Shutdown', retryAfterSeconds: 3 });
    const result = await sender().sendVoip({ token, environment: 'production' }, invitation);
    expect(result).toEqual({ ok: false, kind: 'retry', reason: 'Shutdown', status: 503, retryAfterMs: 3_000 });
    expect(production.requests).toHaveLength(2);
  });

  /** The production fake answers the next requests with `answers`, in order; one VoIP push to a fresh token each. */
  async function refusedPushes(...answers: ApnsScriptedResponse[]): Promise<SendResult[]> {
    for (const a of answers) production.failNext('*', a);
    const s = sender();
    const results: SendResult[] = [];
    for (let i = 0; i < answers.length; i++) results.push(await s.sendVoip({ token: apnsToken(), environment: 'production' }, invitation));
    return results;
  }

  it('reports 403 refusals and topic errors as misconfigured: every push of the app would fail', async () => {
    const results = await refusedPushes({ status: 403, reason: 'BadCertificateEnvironment' }, { status: 400, reason: 'TopicDisallowed' });
    expect(results).toEqual([
      { ok: false, kind: 'misconfigured', reason: 'BadCertificateEnvironment', status: 403 },
      { ok: false, kind: 'misconfigured', reason: 'TopicDisallowed', status: 400 },
    ]);
  });

  it('carries the invitation under the configured payload key', async () => {
    const custom = await startFakeApns({ bundleId: BUNDLE_ID, keyId: key.keyId, teamId: key.teamId, publicKey: key.publicKey, payloadKey: 'acme_call' });
    try {
      const result = await sender({ productionUrl: custom.url, payloadKey: 'acme_call' }).sendVoip({ token: apnsToken(), environment: 'production' }, invitation);
      expect(result.ok).toBe(true);
      expect(custom.requests[0]!.body).toEqual({ aps: {}, acme_call: invitation });
    } finally {
      await custom.close();
    }
  });

  it('reports a token that is not hex as invalidToken (the provider says BadDeviceToken)', async () => {
    const result = await sender().sendVoip({ token: 'not-a-hex-token', environment: 'production' }, invitation);
    expect(result).toEqual({ ok: false, kind: 'invalidToken', reason: 'BadDeviceToken' });
  });

  it('maps 429 with retry-after to retry with retryAfterMs, and 5xx to retry', async () => {
    const [throttled, unavailable, internal] = await refusedPushes({ status: 429, retryAfterSeconds: 30 }, { status: 503 }, { status: 500, retryAfterSeconds: 2 });

    expect(throttled).toEqual({ ok: false, kind: 'retry', reason: 'TooManyRequests', status: 429, retryAfterMs: 30_000 });
    expect(unavailable).toEqual({ ok: false, kind: 'retry', reason: 'ServiceUnavailable', status: 503 });
    expect(internal).toEqual({ ok: false, kind: 'retry', reason: 'InternalServerError', status: 500, retryAfterMs: 2_000 });
    // A retry result is for the queue to act on later: nothing is resent within the call.
    expect(production.requests).toHaveLength(3);
  });

  it('maps other 4xx answers to fatal with the status', async () => {
    const results = await refusedPushes({ status: 413, reason: 'PayloadTooLarge' }, { status: 400, reason: 'BadPriority' });
    expect(results).toEqual([
      { ok: false, kind: 'fatal', reason: 'PayloadTooLarge', status: 413 },
      { ok: false, kind: 'fatal', reason: 'BadPriority', status: 400 },
    ]);
    expect(production.requests).toHaveLength(2);
  });

  it('reports an unreachable provider as retry', async () => {
    const closed = await startFakeApns({ bundleId: BUNDLE_ID, keyId: key.keyId, teamId: key.teamId, publicKey: key.publicKey });
    const url = closed.url;
    await closed.close();
    const token = apnsToken();
    const result = await sender({ productionUrl: url }).sendVoip({ token, environment: 'production' }, invitation);
    expect(result).toEqual({ ok: false, kind: 'retry', reason: 'network ECONNREFUSED' });
  });

  it('reports a provider that does not answer in time as retry', async () => {
    // Accepts TCP connections and never speaks HTTP/2.
    const sockets = new Set<net.Socket>();
    const silent = net.createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    try {
      const result = await within(2_000, 'the send timeout', sender({ productionUrl: url, timeoutMs: 200 }).sendVoip({ token: apnsToken(), environment: 'production' }, invitation));
      expect(result).toEqual({ ok: false, kind: 'retry', reason: 'timeout' });
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  it('reconnects after the provider drops the connection', async () => {
    const s = sender();
    expect((await s.sendVoip({ token: apnsToken(), environment: 'production' }, invitation)).ok).toBe(true);
    production.disconnectAll();
    await sleep(50);
    expect((await s.sendVoip({ token: apnsToken(), environment: 'production' }, invitation)).ok).toBe(true);
    expect(production.sessionsOpened).toBe(2);
    expect(production.distinctJwts).toBe(1);
  });
});

describe('FcmSender', () => {
  let fcm: FakeFcm;
  let pool: Http2Pool;

  const endedSignal = { schemaVersion: 1, eventId: 'evt-2', type: 'call.ended', callId: invitation.callId, revision: '3', occurredAtMs: 1_700_000_010_000, reason: 'callerCancelled' };
  const fcmToken = () => `fcm-${randomBytes(24).toString('base64url')}`;

  beforeEach(async () => {
    fcm = await startFakeFcm();
    pool = new Http2Pool();
  });

  afterEach(async () => {
    await pool.close();
    await fcm.close();
  });

  function sender(overrides: Partial<ConstructorParameters<typeof FcmSender>[0]> = {}): FcmSender {
    return new FcmSender({
      url: fcm.url,
      projectId: fcm.projectId,
      // As the service would read ANDROID_SERVICE_ACCOUNT_FILE.
      serviceAccount: parseServiceAccount(JSON.stringify(fcm.serviceAccount.json)),
      pool,
      timeoutMs: 2_000,
      ...overrides,
    });
  }

  it('sends an invitation as a HIGH data message with exactly the documented body and headers, over HTTP/2', async () => {
    const token = fcmToken();
    const result = await sender().send(token, { priority: 'HIGH', ttlSeconds: 45, callpayload: invitation });

    const [msg] = fcm.messages;
    expect(msg).toBeDefined();
    expect(msg!.status).toBe(200);
    expect(result).toEqual({ ok: true, id: (msg!.response as { name: string }).name });
    expect(msg!.method).toBe('POST');
    expect(msg!.httpVersion).toBe('2.0');
    expect(msg!.path).toBe(`/v1/projects/${fcm.projectId}/messages:send`);
    const issued = (fcm.tokenRequests[0]!.response as { access_token: string }).access_token;
    expect(msg!.headers).toEqual({ authorization: `Bearer ${issued}`, 'content-type': 'application/json' });
    expect(msg!.body).toEqual({
      message: {
        token,
        android: { priority: 'HIGH', ttl: '45s' },
        data: { callpayload: JSON.stringify(invitation) },
      },
    });
    const data = (msg!.body as { message: { data: Record<string, unknown> } }).message.data;
    expect(Object.values(data).every((v) => typeof v === 'string')).toBe(true);
    expect(JSON.parse(data['callpayload'] as string)).toEqual(invitation);
  });

  it('sends signals with NORMAL priority and the ttl in whole seconds', async () => {
    const s = sender();
    await s.send(fcmToken(), { priority: 'NORMAL', ttlSeconds: 60, callpayload: endedSignal });
    await s.send(fcmToken(), { priority: 'HIGH', ttlSeconds: 1, callpayload: invitation });
    const android = fcm.messages.map((m) => (m.body as { message: { android: unknown } }).message.android);
    expect(android).toEqual([
      { priority: 'NORMAL', ttl: '60s' },
      { priority: 'HIGH', ttl: '1s' },
    ]);
    const signal = (fcm.messages[0]!.body as { message: { data: { callpayload: string } } }).message.data.callpayload;
    expect(JSON.parse(signal)).toEqual(endedSignal);
    expect(fcm.messages.every((m) => m.status === 200)).toBe(true);
  });

  it('refuses a ttl that is not a whole number of seconds of at least 1, sending nothing', async () => {
    const s = sender();
    for (const ttlSeconds of [0, -1, 0.5, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      await expect(s.send(fcmToken(), { priority: 'HIGH', ttlSeconds, callpayload: invitation })).rejects.toThrow(RangeError);
    }
    expect(fcm.messages).toHaveLength(0);
    expect(fcm.tokenRequests).toHaveLength(0);
  });

  it('exchanges the service account for an access token with a correct JWT-bearer assertion', async () => {
    await sender().send(fcmToken(), { priority: 'HIGH', ttlSeconds: 30, callpayload: invitation });
    expect(fcm.tokenRequests).toHaveLength(1);
    const [exchange] = fcm.tokenRequests;
    expect(exchange!.status).toBe(200);
    expect(exchange!.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(Object.keys(exchange!.form).sort()).toEqual(['assertion', 'grant_type']);
    expect(exchange!.form['grant_type']).toBe('urn:ietf:params:oauth:grant-type:jwt-bearer');
    const { header, payload } = exchange!.assertion!;
    expect(header.alg).toBe('RS256');
    expect(header.kid).toBe(fcm.serviceAccount.json.private_key_id);
    expect(payload).toMatchObject({ iss: fcm.serviceAccount.json.client_email, scope: FCM_SCOPE, aud: fcm.tokenUrl });
    expect(payload.exp! - payload.iat!).toBe(3600);
    expect(Math.abs(payload.iat! - Date.now() / 1000)).toBeLessThan(5);
  });

  it('uses one token exchange and one HTTP/2 session for many sends, concurrent ones included', async () => {
    const s = sender();
    const results = await Promise.all(Array.from({ length: 10 }, () => s.send(fcmToken(), { priority: 'HIGH', ttlSeconds: 30, callpayload: invitation })));
    for (let i = 0; i < 10; i++) results.push(await s.send(fcmToken(), { priority: 'HIGH', ttlSeconds: 30, callpayload: invitation }));
    expect(results.every((r) => r.ok)).toBe(true);
    expect(fcm.messages).toHaveLength(20);
    expect(fcm.tokenRequests).toHaveLength(1);
    expect(new Set(fcm.messages.map((m) => m.accessToken)).size).toBe(1);
    expect(fcm.connections.http2).toBe(1);
    expect(pool.sessionsCreated).toBe(1);
  });

  it('on 401 exchanges a new access token once and retries once', async () => {
    const s = sender();
    await s.send(fcmToken(), { priority: 'HIGH', ttlSeconds: 30, callpayload: invitation });
    fcm.expireAllAccessTokens();
    const token = fcmToken();

    const result = await s.send(token, { priority: 'HIGH', ttlSeconds: 30, callpayload: invitation });

    expect(result.ok).toBe(true);
    const forToken = fcm.messages.filter((m) => m.token === token);
    expect(forToken.map((m) => m.status)).toEqual([401, 200]);
    expect(forToken[0]!.accessToken).not.toBe(forToken[1]!.accessToken);
    expect(fcm.tokenRequests).toHaveLength(2);
  });

  it('reports the app as misconfigured when the fresh access token is refused too', async () => {
    const invalidated: Array<string | undefined> = [];
    let n = 0;
    const bogus: AccessTokenSource = {
      get: async () => `ya29.not-issued-${n++}`,
      invalidate: (t) => void invalidated.push(t),
    };
    const result = await sender({ accessToken: bogus }).send(fcmToken(), { priority: 'HIGH', ttlSeconds: 30, callpayload: invitation });
    expect(result).toEqual({ ok: false, kind: 'misconfigured', reason: 'UNAUTHENTICATED', status: 401 });
    expect(fcm.messages.map((m) => m.status)).toEqual([401, 401]);
    expect(invalidated).toEqual(['ya29.not-issued-0', 'ya29.not-issued-1']);
  });

  it('reports UNREGISTERED and an invalid registration token as invalidToken', async () => {
    const s = sender();
    const gone = fcmToken();
    const invalid = fcmToken();
    fcm.setTokenState(gone, 'unregistered');
    fcm.setTokenState(invalid, 'invalid');
    const results = [
      await s.send(gone, { priority: 'HIGH', ttlSeconds: 30, callpayload: invitation }),
      await s.send(invalid, { priority: 'HIGH', ttlSeconds: 30, callpayload: invitation }),
    ];
    expect(results).toEqual([
      { ok: false, kind: 'invalidToken', reason: 'UNREGISTERED' },
      { ok: false, kind: 'invalidToken', reason: 'INVALID_ARGUMENT' },
    ]);
    expectNoSecrets(results[0]!, gone);
    expectNoSecrets(results[1]!, invalid);
    expect(fcm.messages).toHaveLength(2);
  });

  it('treats INVALID_ARGUMENT about anything but the token as fatal, keeping the token', async () => {
    fcm.failNext('*', { status: 400, errorCode: 'INVALID_ARGUMENT', message: "Invalid value at 'message.data[0].value'" });
    const result = await sender().send(fcmToken(), { priority: 'HIGH', ttlSeconds: 30, callpayload: invitation });
    expect(result).toEqual({ ok: false, kind: 'fatal', reason: 'INVALID_ARGUMENT', status: 400 });
  });

  it('maps 429 QUOTA_EXCEEDED with retry-after, 503 UNAVAILABLE and 500 INTERNAL to retry', async () => {
    fcm.failNext('*', { status: 429, retryAfterSeconds: 20 });
    fcm.failNext('*', { status: 503, retryAfterSeconds: 3 });
    fcm.failNext('*', { status: 500 });
    const s = sender();
    const results = [];
    for (let i = 0; i < 3; i++) results.push(await s.send(fcmToken(), { priority: 'HIGH', ttlSeconds: 30, callpayload: invitation }));
    expect(results).toEqual([
      { ok: false, kind: 'retry', reason: 'QUOTA_EXCEEDED', status: 429, retryAfterMs: 20_000 },
      { ok: false, kind: 'retry', reason: 'UNAVAILABLE', status: 503, retryAfterMs: 3_000 },
      { ok: false, kind: 'retry', reason: 'INTERNAL', status: 500 },
    ]);
    expect(fcm.messages).toHaveLength(3);
  });

  it('reports SENDER_ID_MISMATCH, THIRD_PARTY_AUTH_ERROR and a wrong project as misconfigured', async () => {
    const s = sender();
    fcm.failNext('*', { status: 403, errorCode: 'SENDER_ID_MISMATCH' });
    const mismatch = await s.send(fcmToken(), { priority: 'HIGH', ttlSeconds: 30, callpayload: invitation });
    expect(mismatch).toEqual({ ok: false, kind: 'misconfigured', reason: 'SENDER_ID_MISMATCH', status: 403 });

    // A 401 about the app's APNs credentials held by FCM, not about our access token: no new exchange, no resend.
    const before = { exchanges: fcm.tokenRequests.length, messages: fcm.messages.length };
    fcm.failNext('*', { status: 401, errorCode: 'THIRD_PARTY_AUTH_ERROR' });
    const thirdParty = await s.send(fcmToken(), { priority: 'HIGH', ttlSeconds: 45, callpayload: invitation });
    expect(thirdParty).toEqual({ ok: false, kind: 'misconfigured', reason: 'THIRD_PARTY_AUTH_ERROR', status: 401 });
    expect([fcm.tokenRequests.length, fcm.messages.length]).toEqual([before.exchanges, before.messages + 1]);

    const wrongProject = await sender({ projectId: 'someone-elses-project' }).send(fcmToken(), { priority: 'HIGH', ttlSeconds: 30, callpayload: invitation });
    expect(wrongProject).toMatchObject({ ok: false, kind: 'misconfigured', status: 403 });
  });

  it('reports a service account the token endpoint refuses as misconfigured, sending nothing', async () => {
    const stranger = makeServiceAccount(fcm.tokenUrl, fcm.projectId);
    const result = await sender({ serviceAccount: parseServiceAccount(JSON.stringify(stranger.json)) }).send(fcmToken(), {
      priority: 'HIGH',
      ttlSeconds: 30,
      callpayload: invitation,
    });
    expect(result).toEqual({ ok: false, kind: 'misconfigured', reason: 'token exchange status 400', status: 400 });
    expect(fcm.messages).toHaveLength(0);
  });

  it('reports an unreachable token endpoint or FCM as retry', async () => {
    const json = { ...fcm.serviceAccount.json };
    const url = fcm.url;
    await fcm.close();
    const unreachableToken = await sender({ serviceAccount: parseServiceAccount(JSON.stringify(json)) }).send(fcmToken(), {
      priority: 'HIGH',
      ttlSeconds: 30,
      callpayload: invitation,
    });
    expect(unreachableToken).toEqual({ ok: false, kind: 'retry', reason: 'token exchange failed' });

    const unreachableFcm = await sender({ url, accessToken: { get: async () => 'ya29.x', invalidate: () => {} } }).send(fcmToken(), {
      priority: 'HIGH',
      ttlSeconds: 30,
      callpayload: invitation,
    });
    expect(unreachableFcm).toEqual({ ok: false, kind: 'retry', reason: 'network ECONNREFUSED' });
  });
});
