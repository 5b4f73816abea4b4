import { randomBytes, randomUUID } from 'node:crypto';
import net from 'node:net';
import apn from '@parse/node-apn';
import { GoogleAuth, type JWT } from 'google-auth-library';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApnsSender } from '../../src/push/apns.js';
import { FcmSender } from '../../src/push/fcm.js';
import { FcmAccessToken, parseServiceAccount } from '../../src/push/fcmAccessToken.js';
import { Http2Pool } from '../../src/push/http2Pool.js';
import { makeApnsKey, startFakeApns, type ApnsKey, type ApnsRecordedRequest, type FakeApns } from '../support/apns-server.js';
import { FCM_SCOPE, GOOGLE_TOKEN_URL, startFakeFcm, type FakeFcm, type FcmRecordedTokenRequest } from '../support/fcm-server.js';

/**
 * The fake push providers are proven against clients no one here wrote: `@parse/node-apn` for
 * APNs and Google's `google-auth-library` for the OAuth token endpoint and FCM. Each fake must
 * accept what the independent client sends, and record the same wire names and values as the
 * project's own client sends for the same message. If the two differ, one of them is wrong.
 */

const BUNDLE_ID = 'com.example.fidelity';
const invitation = { schemaVersion: 1, type: 'call.invited', callId: randomUUID(), displayName: 'Alice', handle: 'app:alice' };

describe('fake APNs against @parse/node-apn', () => {
  let key: ApnsKey;
  let fake: FakeApns;
  let pool: Http2Pool;

  beforeAll(async () => {
    key = makeApnsKey();
    fake = await startFakeApns({ bundleId: BUNDLE_ID, keyId: key.keyId, teamId: key.teamId, publicKey: key.publicKey });
    pool = new Http2Pool();
  });

  afterAll(async () => {
    await pool.close();
    await fake.close();
  });

  /** A node-apn provider with token authentication, as its README shows, connected to the fake. */
  function nodeApn(): apn.Provider {
    const port = Number(new URL(fake.url).port);
    return new apn.Provider({
      token: { key: key.privateKeyPem, keyId: key.keyId, teamId: key.teamId },
      production: true,
      address: `127.0.0.1:${port}`,
      // node-apn speaks TLS to Apple; the fake speaks cleartext HTTP/2, so the test hands it the socket.
      ...({ createConnection: () => net.connect(port, '127.0.0.1') } as object),
    });
  }

  /** One VoIP push through node-apn. */
  async function sendWithNodeApn(token: string): Promise<ApnsRecordedRequest> {
    const provider = nodeApn();
    try {
      const note = new apn.Notification();
      note.topic = `${BUNDLE_ID}.voip`;
      note.pushType = 'voip';
      note.priority = 10;
      note.expiry = 0;
      note.rawPayload = { aps: {}, callpayload: invitation };
      const before = fake.requests.length;
      const result = await provider.send(note, token);
      expect(result.failed).toEqual([]);
      const recorded = (await fake.waitForRequests(before + 1)).at(-1)!;
      // node-apn reads back the apns-id APNs answers with.
      expect(result.sent).toEqual([{ device: token, 'apns-id': recorded.apnsId }]);
      return recorded;
    } finally {
      provider.shutdown();
    }
  }

  async function sendWithOurClient(token: string): Promise<ApnsRecordedRequest> {
    const sender = new ApnsSender({ productionUrl: fake.url, keyPem: key.privateKeyPem, keyId: key.keyId, teamId: key.teamId, bundleId: BUNDLE_ID, pool });
    const before = fake.requests.length;
    expect(await sender.sendVoip({ token, environment: 'production' }, invitation)).toMatchObject({ ok: true });
    return (await fake.waitForRequests(before + 1)).at(-1)!;
  }

  it('accepts node-apn\'s VoIP push and records the same headers, token claims and body as ours', async () => {
    const theirs = await sendWithNodeApn('ab'.repeat(32));
    const ours = await sendWithOurClient('cd'.repeat(32));

    expect(theirs.status).toBe(200);
    const { authorization: theirAuth, ...theirHeaders } = theirs.headers;
    const { authorization: ourAuth, ...ourHeaders } = ours.headers;
    expect(ourHeaders).toEqual(theirHeaders);
    expect(ourHeaders).toEqual({ 'apns-push-type': 'voip', 'apns-topic': `${BUNDLE_ID}.voip`, 'apns-priority': '10', 'apns-expiration': '0' });
    expect(ourAuth?.split(' ')[0]?.toLowerCase()).toBe(theirAuth?.split(' ')[0]?.toLowerCase());
    expect(ours.method).toBe(theirs.method);
    expect(ours.path.replace(/[0-9a-f]+$/, '')).toBe(theirs.path.replace(/[0-9a-f]+$/, ''));
    // Apple reads `alg` and `kid` from the token's header (node-apn adds `typ`, which Apple ignores).
    const { alg, kid } = theirs.jwt!.header;
    expect(ours.jwt?.header).toEqual({ alg, kid });
    expect(Object.keys(ours.jwt!.payload).sort()).toEqual(Object.keys(theirs.jwt!.payload).sort());
    expect(ours.jwt?.payload.iss).toBe(theirs.jwt?.payload.iss);
    expect(ours.body).toEqual(theirs.body);
  });

  it("accepts node-apn's missed-call alert, built with its own alert setters, and records the same headers and body as ours", async () => {
    const callId = randomUUID();
    const payload = {
      schemaVersion: 1 as const,
      eventId: `${callId}:2:missed.bob`,
      type: 'call.missed' as const,
      callId,
      revision: '2',
      occurredAtMs: 1_800_000_000_000,
      userId: 'bob',
      callerUserId: 'alice',
      displayName: 'Alice',
      handle: 'app:alice',
      video: false,
    };
    const expiresAtMs = payload.occurredAtMs + 86_400_000;
    const provider = nodeApn();
    let theirs: ApnsRecordedRequest;
    try {
      const note = new apn.Notification();
      note.topic = BUNDLE_ID;
      note.pushType = 'alert';
      note.priority = 10;
      note.expiry = Math.floor(expiresAtMs / 1000);
      note.collapseId = callId;
      // node-apn's own `aps.alert` setters (its type declarations leave them out).
      Object.assign(note, { locKey: 'MISSED_CALL', locArgs: ['Alice'] });
      note.threadId = 'alice';
      note.payload = { callpayload: payload };
      const token = '12'.repeat(32);
      const before = fake.requests.length;
      const result = await provider.send(note, token);
      expect(result.failed).toEqual([]);
      theirs = (await fake.waitForRequests(before + 1)).at(-1)!;
    } finally {
      provider.shutdown();
    }
    const sender = new ApnsSender({ productionUrl: fake.url, keyPem: key.privateKeyPem, keyId: key.keyId, teamId: key.teamId, bundleId: BUNDLE_ID, pool });
    const before = fake.requests.length;
    expect(await sender.sendAlert({ token: '34'.repeat(32), environment: 'production' }, { payload, locKey: 'MISSED_CALL', expiresAtMs })).toMatchObject({ ok: true });
    const ours = (await fake.waitForRequests(before + 1)).at(-1)!;

    expect(theirs.status).toBe(200);
    expect(ours.status).toBe(200);
    const { authorization: _theirAuth, ...theirHeaders } = theirs.headers;
    const { authorization: _ourAuth, ...ourHeaders } = ours.headers;
    expect(ourHeaders).toEqual(theirHeaders);
    expect(ourHeaders).toEqual({
      'apns-push-type': 'alert',
      'apns-topic': BUNDLE_ID,
      'apns-priority': '10',
      'apns-expiration': String(Math.floor(expiresAtMs / 1000)),
      'apns-collapse-id': callId,
    });
    expect(ours.body).toEqual(theirs.body);
  });

  it('answers node-apn with the documented reasons and bodies', async () => {
    const gone = 'ef'.repeat(32);
    fake.failNext(gone, { status: 410, reason: 'Unregistered', timestampMs: 1_700_000_000_000 });
    const provider = nodeApn();
    try {
      const note = new apn.Notification();
      note.topic = `${BUNDLE_ID}.voip`;
      note.pushType = 'voip';
      note.rawPayload = { aps: {}, callpayload: invitation };
      const result = await provider.send(note, gone);
      expect(result.failed).toMatchObject([{ device: gone, status: 410, response: { reason: 'Unregistered', timestamp: 1_700_000_000_000 } }]);

      // Without a topic, APNs (and so the fake) refuses a token-authenticated push.
      const noTopic = new apn.Notification();
      noTopic.pushType = 'voip';
      noTopic.rawPayload = { aps: {}, callpayload: invitation };
      const refused = await provider.send(noTopic, 'ab'.repeat(32));
      expect(refused.failed).toMatchObject([{ status: 400, response: { reason: 'MissingTopic' } }]);
    } finally {
      provider.shutdown();
    }
  });
});

describe('fake FCM and its token endpoint against google-auth-library', () => {
  let fake: FakeFcm;
  let pool: Http2Pool;
  /** The fake's service account with Google's own token_uri, as every real key file has it. */
  let keyFile: Record<string, string>;

  beforeAll(async () => {
    fake = await startFakeFcm();
    pool = new Http2Pool();
    keyFile = { ...fake.serviceAccount.json, token_uri: GOOGLE_TOKEN_URL };
  });

  afterAll(async () => {
    await pool.close();
    await fake.close();
  });

  /** Google's client, with its requests to Google's token endpoint sent to the fake's. */
  async function googleClient(): Promise<JWT> {
    const auth = new GoogleAuth({ credentials: keyFile, scopes: [FCM_SCOPE] });
    const client = (await auth.getClient()) as JWT;
    client.transporter.interceptors.request.add({
      resolved: async (options) => {
        if (String(options.url) === GOOGLE_TOKEN_URL) options.url = new URL(fake.tokenUrl);
        return options;
      },
    });
    return client;
  }

  /** Our token client, reading the same key file, its requests to Google's endpoint sent to the fake's. */
  function ourTokenClient(): FcmAccessToken {
    return new FcmAccessToken({
      serviceAccount: parseServiceAccount(JSON.stringify(keyFile)),
      fetch: (input, init) => globalThis.fetch(String(input) === GOOGLE_TOKEN_URL ? fake.tokenUrl : input, init),
    });
  }

  function lastTokenRequest(): FcmRecordedTokenRequest {
    return fake.tokenRequests.at(-1)!;
  }

  it('issues google-auth-library an access token for an assertion with the same claims as ours', async () => {
    const { token } = await (await googleClient()).getAccessToken();
    expect(token).toMatch(/^ya29\./);
    const theirs = lastTokenRequest();
    expect(theirs.status).toBe(200);

    expect(await ourTokenClient().get()).toMatch(/^ya29\./);
    const ours = lastTokenRequest();
    expect(ours.status).toBe(200);

    expect(Object.keys(ours.form).sort()).toEqual(Object.keys(theirs.form).sort());
    expect(ours.form['grant_type']).toBe(theirs.form['grant_type']);
    expect(ours.headers['content-type']).toMatch(/^application\/x-www-form-urlencoded/);
    expect(theirs.headers['content-type']).toMatch(/^application\/x-www-form-urlencoded/);
    const [o, t] = [ours.assertion!, theirs.assertion!];
    expect(o.header.alg).toBe(t.header.alg);
    for (const claim of ['iss', 'scope', 'aud'] as const) expect(o.payload[claim], claim).toBe(t.payload[claim]);
    expect(o.payload).toMatchObject({ iss: keyFile['client_email'], scope: FCM_SCOPE, aud: GOOGLE_TOKEN_URL });
    for (const a of [o, t]) expect(a.payload.exp! - a.payload.iat!).toBeLessThanOrEqual(3600);
  });

  it('accepts a message google-auth-library sends with its token, as it accepts ours', async () => {
    const client = await googleClient();
    const sendUrl = `${fake.url}/v1/projects/${fake.projectId}/messages:send`;
    const registration = `fcm-${randomBytes(16).toString('base64url')}`;

    const sender = new FcmSender({ url: fake.url, projectId: fake.projectId, accessToken: ourTokenClient(), pool });
    expect(await sender.send(registration, { priority: 'HIGH', ttlSeconds: 30, callpayload: invitation })).toMatchObject({ ok: true });
    const ours = fake.messages.at(-1)!;

    const res = await client.request<{ name: string }>({ url: sendUrl, method: 'POST', data: ours.body });
    expect(res.status).toBe(200);
    expect(res.data.name).toMatch(new RegExp(`^projects/${fake.projectId}/messages/`));
    const theirs = fake.messages.at(-1)!;
    expect(theirs.status).toBe(200);
    expect(theirs.path).toBe(ours.path);
    expect(theirs.headers.authorization).toMatch(/^Bearer ya29\./);
    expect(ours.headers.authorization).toMatch(/^Bearer ya29\./);
  });

  it('answers google-auth-library with Google\'s error shape', async () => {
    const client = await googleClient();
    const registration = `fcm-${randomBytes(16).toString('base64url')}`;
    fake.setTokenState(registration, 'unregistered');
    const body = { message: { token: registration, android: { priority: 'HIGH', ttl: '30s' }, data: { callpayload: JSON.stringify(invitation) } } };
    const err = await client
      .request({ url: `${fake.url}/v1/projects/${fake.projectId}/messages:send`, method: 'POST', data: body, retry: false })
      .then(() => undefined, (e: { response?: { status: number; data: unknown } }) => e);
    expect(err?.response?.status).toBe(404);
    expect(err?.response?.data).toEqual({
      error: {
        code: 404,
        message: 'Requested entity was not found.',
        status: 'NOT_FOUND',
        details: [{ '@type': 'type.googleapis.com/google.firebase.fcm.v1.FcmError', errorCode: 'UNREGISTERED' }],
      },
    });
  });
});
