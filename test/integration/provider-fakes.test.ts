import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { connect, type ClientHttp2Session, type OutgoingHttpHeaders } from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, Redis } from 'ioredis';
import { importPKCS8, SignJWT, type JWTPayload } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeApnsKey, startFakeApns, type ApnsKey, type FakeApns } from '../support/apns-server.js';
import { FCM_SCOPE, GOOGLE_TOKEN_URL, makeServiceAccount, startFakeFcm, writeServiceAccountFile, type FakeFcm, type ServiceAccountJson } from '../support/fcm-server.js';
import { redisCommand, startRedis, startRedisCluster } from '../support/redis-server.js';

/** Tests of the test harness itself: the fake push providers and the redis-server launcher. */

interface H2Response {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One HTTP/2 request on `session`; resolves with the whole answer. */
function h2Request(session: ClientHttp2Session, headers: OutgoingHttpHeaders, body?: string): Promise<H2Response> {
  return new Promise((resolve, reject) => {
    const stream = session.request(headers);
    let text = '';
    let status = 0;
    let responseHeaders: H2Response['headers'] = {};
    stream.setEncoding('utf8');
    stream.on('response', (h) => {
      status = Number(h[':status']);
      responseHeaders = h;
    });
    stream.on('data', (chunk: string) => (text += chunk));
    stream.on('end', () => resolve({ status, headers: responseHeaders, text }));
    stream.on('error', reject);
    stream.end(body);
  });
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

describe('fake APNs', () => {
  const bundleId = 'com.example.calls';
  const token = 'ab'.repeat(32);
  let key: ApnsKey;
  let apns: FakeApns;
  let client: ClientHttp2Session;

  beforeAll(async () => {
    key = makeApnsKey();
    apns = await startFakeApns({ ...key, bundleId });
    client = connect(apns.url);
  });

  afterAll(async () => {
    client.close();
    await apns.close();
  });

  async function providerJwt(opts: { iat?: number; kid?: string; iss?: string; pem?: string } = {}): Promise<string> {
    const signingKey = await importPKCS8(opts.pem ?? key.privateKeyPem, 'ES256');
    return new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: opts.kid ?? key.keyId })
      .setIssuer(opts.iss ?? key.teamId)
      .setIssuedAt(opts.iat ?? nowSeconds())
      .sign(signingKey);
  }

  function voipHeaders(jwt: string, deviceToken = token): OutgoingHttpHeaders {
    return {
      ':method': 'POST',
      ':path': `/3/device/${deviceToken}`,
      authorization: `bearer ${jwt}`,
      'apns-push-type': 'voip',
      'apns-topic': `${bundleId}.voip`,
      'apns-priority': '10',
      'apns-expiration': '0',
    };
  }

  const invitation = {
    schemaVersion: 1,
    type: 'call.invited',
    callId: randomUUID(),
    displayName: 'Alice',
    handle: 'app:alice',
  };
  const validBody = JSON.stringify({ aps: {}, callpayload: invitation });

  it('accepts a correct VoIP push and records it', async () => {
    const jwt = await providerJwt();
    const before = apns.requests.length;
    const res = await h2Request(client, voipHeaders(jwt), validBody);
    expect(res.status).toBe(200);
    expect(res.text).toBe('');
    expect(String(res.headers['apns-id'])).toMatch(UUID);
    const [recorded] = (await apns.waitForRequests(before + 1)).slice(before);
    expect(recorded).toMatchObject({
      method: 'POST',
      token,
      status: 200,
      body: { aps: {}, callpayload: invitation },
      jwt: { header: { alg: 'ES256', kid: key.keyId }, payload: { iss: key.teamId } },
    });
    expect(recorded?.headers['apns-topic']).toBe(`${bundleId}.voip`);
  });

  it('accepts the scheme in any case and counts distinct provider tokens and sessions', async () => {
    const jwt = await providerJwt({ iat: nowSeconds() - 5 });
    const distinctBefore = apns.distinctJwts;
    for (const scheme of ['Bearer', 'BEARER']) {
      const res = await h2Request(client, { ...voipHeaders(jwt), authorization: `${scheme} ${jwt}` }, validBody);
      expect(res.status).toBe(200);
    }
    expect(apns.distinctJwts).toBe(distinctBefore + 1);
    expect(apns.sessionsOpened).toBe(1);
    const second = connect(apns.url);
    await h2Request(second, voipHeaders(jwt), validBody);
    second.close();
    expect(apns.sessionsOpened).toBe(2);
  });

  const headerCases: [string, (h: OutgoingHttpHeaders) => void, number, string][] = [
    ['missing topic', (h) => delete h['apns-topic'], 400, 'MissingTopic'],
    ['the topic under the spec\'s ios- name', (h) => ((h['ios-topic'] = h['apns-topic']), delete h['apns-topic']), 400, 'MissingTopic'],
    ['malformed topic', (h) => (h['apns-topic'] = 'not a topic!'), 400, 'BadTopic'],
    ['topic without .voip', (h) => (h['apns-topic'] = bundleId), 400, 'DeviceTokenNotForTopic'],
    ['other app topic', (h) => (h['apns-topic'] = 'com.other.app.voip'), 400, 'DeviceTokenNotForTopic'],
    ['missing push type', (h) => delete h['apns-push-type'], 400, 'InvalidPushType'],
    ['unknown push type', (h) => (h['apns-push-type'] = 'ring'), 400, 'InvalidPushType'],
    ['alert push type to the .voip topic', (h) => (h['apns-push-type'] = 'alert'), 400, 'DeviceTokenNotForTopic'],
    ['priority 7', (h) => (h['apns-priority'] = '7'), 400, 'BadPriority'],
    ['expiration that is not a time', (h) => (h['apns-expiration'] = 'soon'), 400, 'BadExpirationDate'],
    ['apns-id that is not a UUID', (h) => (h['apns-id'] = 'push-1'), 400, 'BadMessageId'],
    ['collapse id over 64 bytes', (h) => (h['apns-collapse-id'] = 'c'.repeat(65)), 400, 'BadCollapseId'],
    ['missing authorization', (h) => delete h['authorization'], 403, 'MissingProviderToken'],
    ['basic authorization', (h) => (h['authorization'] = 'Basic dXNlcjpwYXNz'), 403, 'InvalidProviderToken'],
    ['non-hex device token', (h) => (h[':path'] = '/3/device/xyz'), 400, 'BadDeviceToken'],
    ['empty device token', (h) => (h[':path'] = '/3/device/'), 400, 'MissingDeviceToken'],
    ['wrong path', (h) => (h[':path'] = '/2/device/' + token), 404, 'BadPath'],
    ['GET method', (h) => (h[':method'] = 'GET'), 405, 'MethodNotAllowed'],
  ];

  it('ignores headers APNs does not read, and takes optional ones it does', async () => {
    const jwt = await providerJwt();
    const extra = { 'ios-push-type': 'voip', 'content-type': 'text/plain', 'apns-id': randomUUID(), 'apns-collapse-id': 'call-1' };
    for (const headers of [{ ...voipHeaders(jwt), ...extra }, { ...voipHeaders(jwt), 'apns-priority': '5' }]) {
      expect((await h2Request(client, headers, validBody)).status).toBe(200);
    }
    const withoutOptional = voipHeaders(jwt);
    delete withoutOptional['apns-priority'];
    delete withoutOptional['apns-expiration'];
    expect((await h2Request(client, withoutOptional, validBody)).status).toBe(200);
  });

  it.each(headerCases)('rejects a push with %s', async (_name, mutate, status, reason) => {
    const headers = voipHeaders(await providerJwt());
    mutate(headers);
    const body = headers[':method'] === 'GET' ? undefined : validBody;
    const res = await h2Request(client, headers, body);
    expect(res.status).toBe(status);
    expect(JSON.parse(res.text)).toEqual({ reason });
    expect(apns.requests.at(-1)).toMatchObject({ status, reason });
  });

  const bodyCases: [string, string, number, string][] = [
    ['an empty body', '', 400, 'PayloadEmpty'],
    ['a body that is not JSON', '{"aps":', 400, 'BadPayload'],
    ['a non-empty aps', JSON.stringify({ aps: { alert: 'hi' }, callpayload: invitation }), 400, 'BadPayload'],
    ['no callpayload', JSON.stringify({ aps: {} }), 400, 'BadPayload'],
    ['a string callpayload', JSON.stringify({ aps: {}, callpayload: JSON.stringify(invitation) }), 400, 'BadPayload'],
    ['a body over 5120 bytes', JSON.stringify({ aps: {}, callpayload: { pad: 'x'.repeat(5200) } }), 413, 'PayloadTooLarge'],
  ];

  it.each(bodyCases)('rejects %s', async (_name, body, status, reason) => {
    const res = await h2Request(client, voipHeaders(await providerJwt()), body);
    expect(res.status).toBe(status);
    expect(JSON.parse(res.text)).toEqual({ reason });
  });

  it('rejects expired, future, foreign and forged provider tokens', async () => {
    const other = makeApnsKey();
    const cases: [Promise<string>, string][] = [
      [providerJwt({ iat: nowSeconds() - 3601 }), 'ExpiredProviderToken'],
      [providerJwt({ iat: nowSeconds() + 600 }), 'InvalidProviderToken'],
      [providerJwt({ kid: other.keyId }), 'InvalidProviderToken'],
      [providerJwt({ iss: other.teamId }), 'InvalidProviderToken'],
      [providerJwt({ pem: other.privateKeyPem }), 'InvalidProviderToken'],
      [Promise.resolve('not.a.jwt'), 'InvalidProviderToken'],
    ];
    for (const [jwt, reason] of cases) {
      const res = await h2Request(client, voipHeaders(await jwt), validBody);
      expect(res.status).toBe(403);
      expect(JSON.parse(res.text)).toEqual({ reason });
    }
  });

  it('plays scripted failures once, for one token or any', async () => {
    const jwt = await providerJwt();
    apns.failNext(token, { status: 429, retryAfterSeconds: 7 });
    apns.failNext('*', { status: 503 });
    apns.failNext(token, { status: 410, timestampMs: 1234 });

    const first = await h2Request(client, voipHeaders(jwt), validBody);
    expect(first.status).toBe(429);
    expect(first.headers['retry-after']).toBe('7');
    expect(JSON.parse(first.text)).toEqual({ reason: 'TooManyRequests' });

    const second = await h2Request(client, voipHeaders(jwt), validBody);
    expect(second.status).toBe(410);
    expect(JSON.parse(second.text)).toEqual({ reason: 'Unregistered', timestamp: 1234 });

    const third = await h2Request(client, voipHeaders(jwt), validBody);
    expect(third.status).toBe(503);
    expect(JSON.parse(third.text)).toEqual({ reason: 'ServiceUnavailable' });

    expect((await h2Request(client, voipHeaders(jwt), validBody)).status).toBe(200);
  });

  it('closes the connection after a Shutdown answer, as APNs does', async () => {
    const own = connect(apns.url);
    const goaway = new Promise<void>((resolve) => own.once('goaway', () => resolve()));
    apns.failNext(token, { status: 503, reason: 'Shutdown' });
    const res = await h2Request(own, voipHeaders(await providerJwt()), validBody);
    expect(res.status).toBe(503);
    expect(JSON.parse(res.text)).toEqual({ reason: 'Shutdown' });
    await goaway;
    own.close();
  });

  it('answers for unregistered and bad tokens until they are valid again', async () => {
    const jwt = await providerJwt();
    const gone = 'cd'.repeat(32);
    const bad = 'ef'.repeat(32);
    apns.setTokenState(gone, 'unregistered');
    apns.setTokenState(bad, 'bad');

    const goneRes = await h2Request(client, voipHeaders(jwt, gone), validBody);
    expect(goneRes.status).toBe(410);
    const goneBody = JSON.parse(goneRes.text) as { reason: string; timestamp: number };
    expect(goneBody.reason).toBe('Unregistered');
    expect(Math.abs(goneBody.timestamp - Date.now())).toBeLessThan(10_000);

    const badRes = await h2Request(client, voipHeaders(jwt, bad), validBody);
    expect(badRes.status).toBe(400);
    expect(JSON.parse(badRes.text)).toEqual({ reason: 'BadDeviceToken' });

    apns.setTokenState(gone, 'valid');
    expect((await h2Request(client, voipHeaders(jwt, gone), validBody)).status).toBe(200);
  });

  it('times out waiting for requests that never come', async () => {
    await expect(apns.waitForRequests(apns.requests.length + 1, 50)).rejects.toThrow(/waited 50 ms/);
  });
});

/** What messages:send answers: a name on success, Google's error otherwise. */
interface FcmAnswer {
  name?: string;
  error?: { code: number; message: string; status: string; details?: unknown[] };
}

describe('fake FCM', () => {
  let fcm: FakeFcm;
  let account: ServiceAccountJson;
  let client: ClientHttp2Session;

  beforeAll(async () => {
    fcm = await startFakeFcm();
    account = fcm.serviceAccount.json;
    client = connect(fcm.url);
  });

  afterAll(async () => {
    client.close();
    await fcm.close();
  });

  async function assertion(
    opts: { sa?: ServiceAccountJson; aud?: string; iat?: number; lifetime?: number; claims?: JWTPayload } = {},
  ): Promise<string> {
    const sa = opts.sa ?? account;
    const iat = opts.iat ?? nowSeconds();
    return new SignJWT({ scope: FCM_SCOPE, ...opts.claims })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid: sa.private_key_id })
      .setIssuer(sa.client_email)
      .setAudience(opts.aud ?? sa.token_uri)
      .setIssuedAt(iat)
      .setExpirationTime(iat + (opts.lifetime ?? 3600))
      .sign(await importPKCS8(sa.private_key, 'RS256'));
  }

  /** The token exchange over HTTP/1.1 (fetch), as most OAuth clients do it. */
  async function exchange(jwt: string, grantType = 'urn:ietf:params:oauth:grant-type:jwt-bearer') {
    const res = await fetch(fcm.tokenUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: grantType, assertion: jwt }),
    });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  }

  async function accessToken(): Promise<string> {
    const { json } = await exchange(await assertion());
    return String(json['access_token']);
  }

  function sendPath(): string {
    return `/v1/projects/${fcm.projectId}/messages:send`;
  }

  /** messages:send over HTTP/2. */
  async function send(body: unknown, bearer: string | null) {
    const headers: OutgoingHttpHeaders = { ':method': 'POST', ':path': sendPath(), 'content-type': 'application/json' };
    if (bearer !== null) headers['authorization'] = `Bearer ${bearer}`;
    const res = await h2Request(client, headers, JSON.stringify(body));
    return { status: res.status, headers: res.headers, json: JSON.parse(res.text) as FcmAnswer };
  }

  const callpayload = JSON.stringify({ schemaVersion: 1, type: 'call.invited', callId: randomUUID(), displayName: 'Bob', handle: 'app:bob' });
  function invite(token: string, patch: Record<string, unknown> = {}): { message: Record<string, unknown> } {
    return { message: { token, android: { priority: 'HIGH', ttl: '45s' }, data: { callpayload }, ...patch } };
  }

  it('exchanges a signed assertion for an access token and accepts a message sent with it', async () => {
    const { status, json } = await exchange(await assertion());
    expect(status).toBe(200);
    expect(json).toMatchObject({ token_type: 'Bearer', expires_in: 3600 });
    expect(fcm.tokenRequests.at(-1)?.assertion?.payload).toMatchObject({ iss: account.client_email, aud: fcm.tokenUrl });

    const res = await send(invite('device-1'), String(json['access_token']));
    expect(res.status).toBe(200);
    expect(res.json.name).toMatch(new RegExp(`^projects/${fcm.projectId}/messages/.+`));
    const messages = await fcm.waitForMessages(1);
    expect(messages.at(-1)).toMatchObject({ token: 'device-1', status: 200, httpVersion: '2.0' });
  });

  it('serves HTTP/1.1 and HTTP/2 on the same port', async () => {
    const bearer = await accessToken();
    const res = await fetch(fcm.url + sendPath(), {
      method: 'POST',
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
      body: JSON.stringify(invite('device-http1')),
    });
    expect(res.status).toBe(200);
    expect(fcm.messages.at(-1)?.httpVersion).toBe('1.1');
    expect(fcm.connections.http1).toBeGreaterThan(0);
    expect(fcm.connections.http2).toBe(1);
  });

  it('refuses bad assertions', async () => {
    const stranger = makeServiceAccount(fcm.tokenUrl, fcm.projectId);
    const cases: [string, Promise<string>, string, string?][] = [
      ['wrong audience', assertion({ aud: 'https://accounts.example.com/token' }), 'invalid_grant'],
      ['expired', assertion({ iat: nowSeconds() - 7200 }), 'invalid_grant'],
      ['too long-lived', assertion({ lifetime: 7200 }), 'invalid_grant'],
      ['issued in the future', assertion({ iat: nowSeconds() + 600 }), 'invalid_grant'],
      ['untrusted account', assertion({ sa: stranger.json }), 'invalid_grant'],
      ['forged signature', assertion({ sa: { ...account, private_key: stranger.json.private_key } }), 'invalid_grant'],
      ['wrong scope', assertion({ claims: { scope: 'https://www.googleapis.com/auth/cloud-platform' } }), 'invalid_scope'],
      ['wrong grant type', assertion(), 'unsupported_grant_type', 'client_credentials'],
    ];
    for (const [name, jwt, error, grantType] of cases) {
      const { status, json } = await exchange(await jwt, grantType);
      expect({ name, status, error: json.error }).toEqual({ name, status: 400, error });
    }
  });

  it('rejects messages our product must not send', async () => {
    const bearer = await accessToken();
    const cases: [string, unknown, RegExp][] = [
      ['a notification block', invite('d', { notification: { title: 'Call' } }), /notification is not allowed/],
      ['an android notification', invite('d', { android: { priority: 'HIGH', ttl: '45s', notification: {} } }), /notification is not allowed/],
      ['a non-string data value', invite('d', { data: { callpayload, attempt: 1 } }), /data\[attempt\]/],
      ['a callpayload that is not JSON', invite('d', { data: { callpayload: '{oops' } }), /callpayload/],
      ['no callpayload', invite('d', { data: { other: 'x' } }), /callpayload is required/],
      ['a zero ttl', invite('d', { android: { priority: 'HIGH', ttl: '0s' } }), /must not be 0s/],
      ['a numeric ttl', invite('d', { android: { priority: 'HIGH', ttl: 45 } }), /ttl/],
      ['a lower-case priority', invite('d', { android: { priority: 'high', ttl: '45s' } }), /priority/],
      ['a misspelt field', invite('d', { tokne: 'd' }), /Unknown name "tokne"/],
      ['a topic target', invite('d', { topic: 'news' }), /device token/],
      ['a reserved data key', invite('d', { data: { callpayload, from: 'me' } }), /Invalid data payload key: from/],
    ];
    for (const [name, body, message] of cases) {
      const res = await send(body, bearer);
      expect({ name, status: res.status }).toEqual({ name, status: 400 });
      expect(res.json.error).toMatchObject({
        code: 400,
        status: 'INVALID_ARGUMENT',
        details: [{ '@type': 'type.googleapis.com/google.firebase.fcm.v1.FcmError', errorCode: 'INVALID_ARGUMENT' }],
      });
      expect(res.json.error?.message).toMatch(message);
    }
  });

  it('requires a live access token', async () => {
    const missing = await send(invite('d'), null);
    expect(missing.status).toBe(401);
    expect(missing.json.error).toMatchObject({ code: 401, status: 'UNAUTHENTICATED' });
    expect((await send(invite('d'), 'ya29.made-up')).status).toBe(401);

    const bearer = await accessToken();
    expect((await send(invite('d'), bearer)).status).toBe(200);
    fcm.expireAllAccessTokens();
    expect((await send(invite('d'), bearer)).status).toBe(401);
  });

  it('plays scripted failures and token states', async () => {
    const bearer = await accessToken();
    fcm.failNext('device-2', { status: 503, retryAfterSeconds: 10 });
    fcm.failNext('*', { status: 429 });

    const unavailable = await send(invite('device-2'), bearer);
    expect(unavailable.status).toBe(503);
    expect(unavailable.headers['retry-after']).toBe('10');
    expect(unavailable.json.error).toMatchObject({ status: 'UNAVAILABLE', details: [{ errorCode: 'UNAVAILABLE' }] });

    const quota = await send(invite('device-3'), bearer);
    expect(quota.status).toBe(429);
    expect(quota.json.error).toMatchObject({ status: 'RESOURCE_EXHAUSTED', details: [{ errorCode: 'QUOTA_EXCEEDED' }] });
    expect((await send(invite('device-2'), bearer)).status).toBe(200);

    fcm.setTokenState('gone', 'unregistered');
    fcm.setTokenState('garbage', 'invalid');
    const gone = await send(invite('gone'), bearer);
    expect(gone.status).toBe(404);
    expect(gone.json.error).toMatchObject({ status: 'NOT_FOUND', details: [{ errorCode: 'UNREGISTERED' }] });
    const garbage = await send(invite('garbage'), bearer);
    expect(garbage.status).toBe(400);
    expect(garbage.json.error).toMatchObject({
      message: 'The registration token is not a valid FCM registration token',
      details: [{ errorCode: 'INVALID_ARGUMENT' }, { '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: [{ field: 'message.token' }] }],
    });
  });

  it("takes Google's own token URL as an assertion's audience, as Google does wherever the assertion is posted", async () => {
    const { status, json } = await exchange(await assertion({ aud: GOOGLE_TOKEN_URL }));
    expect({ status, tokenType: json.token_type }).toEqual({ status: 200, tokenType: 'Bearer' });
  });

  it('writes a service account file only its owner can read', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fcm-sa-'));
    try {
      const path = writeServiceAccountFile(dir, account);
      expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual(account);
      expect(statSync(path).mode & 0o777).toBe(0o600);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('redis-server launcher', () => {
  it('starts a working Redis and stop() kills it and removes its directory', async () => {
    const server = await startRedis({ appendOnly: true });
    const client = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    client.on('error', () => {});
    await client.connect();
    await client.set('k', 'v');
    expect(await client.get('k')).toBe('v');
    expect(await client.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
    client.disconnect();

    await server.stop();
    expect(() => process.kill(server.pid, 0)).toThrow();
    expect(existsSync(server.dir)).toBe(false);
    await expect(redisCommand(server.port, ['PING'])).rejects.toThrow();
    await server.stop();
  });

  it('starts a Redis Cluster that serves keys in every slot range', async () => {
    const cluster = await startRedisCluster(3);
    try {
      expect(cluster.nodes).toHaveLength(3);
      const client = new Cluster(cluster.nodes);
      client.on('error', () => {});
      const keys = Array.from({ length: 30 }, (_, i) => `key-${i}`);
      await Promise.all(keys.map((k) => client.set(k, k)));
      expect(await Promise.all(keys.map((k) => client.get(k)))).toEqual(keys);
      // Every master got a share of the slots.
      const slots = await client.cluster('SLOTS');
      const servingPorts = new Set(slots.map(([, , master]) => master?.[1]));
      expect(servingPorts).toEqual(new Set(cluster.nodes.map((n) => n.port)));
      await client.quit();
    } finally {
      await cluster.stop();
    }
  });
});
