import { sleep } from '../support/wait.js';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { decodeProtectedHeader, jwtVerify } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { FCM_SCOPE, FcmAccessToken, FcmAuthError, parseServiceAccount, type ServiceAccount } from '../../src/push/fcmAccessToken.js';

const TOKEN_URI = 'https://oauth2.test/token';
const START = Date.UTC(2025, 0, 1, 12, 0, 0);
const MINUTE = 60_000;

let account: ServiceAccount;
let publicKey: KeyObject;

beforeAll(() => {
  const pair = generateKeyPairSync('rsa', { modulusLength: 2048 });
  publicKey = pair.publicKey;
  account = {
    client_email: 'sender@project.iam.gserviceaccount.com',
    private_key: pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    token_uri: TOKEN_URI,
    private_key_id: 'key-1',
  };
});

interface Exchange {
  url: string;
  form: URLSearchParams;
  contentType: string | null;
}

/** A token endpoint answering from a script; records what it was sent. */
function endpoint(answer: (n: number) => Response | Promise<Response> | Error) {
  const exchanges: Exchange[] = [];
  const fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const n = exchanges.length;
    exchanges.push({
      url: String(input),
      form: new URLSearchParams(String(init?.body)),
      contentType: new Headers(init?.headers).get('content-type'),
    });
    const a = await answer(n);
    if (a instanceof Error) throw a;
    return a;
  }) as typeof globalThis.fetch;
  return { fetch, exchanges };
}

const granted = (token: string, expiresIn = 3600) =>
  new Response(JSON.stringify({ access_token: token, expires_in: expiresIn, token_type: 'Bearer' }), {
    status: 200,
    headers: { 'content-type': 'application/json' },
  });

function source(fetch: typeof globalThis.fetch) {
  const clock = { now: START };
  const tokens = new FcmAccessToken({ serviceAccount: account, fetch, now: () => clock.now });
  return { clock, tokens };
}

describe('FcmAccessToken', () => {
  it('posts a form-encoded JWT-bearer grant with an RS256 assertion for the FCM scope', async () => {
    const { fetch, exchanges } = endpoint(() => granted('ya29.a'));
    const { tokens } = source(fetch);
    expect(await tokens.get()).toBe('ya29.a');

    expect(exchanges).toHaveLength(1);
    const [ex] = exchanges;
    expect(ex!.url).toBe(TOKEN_URI);
    expect(ex!.contentType).toBe('application/x-www-form-urlencoded');
    expect(ex!.form.get('grant_type')).toBe('urn:ietf:params:oauth:grant-type:jwt-bearer');
    const assertion = ex!.form.get('assertion')!;
    expect(decodeProtectedHeader(assertion)).toEqual({ alg: 'RS256', typ: 'JWT', kid: 'key-1' });
    const { payload } = await jwtVerify(assertion, publicKey, { currentDate: new Date(START), audience: TOKEN_URI });
    expect(payload).toEqual({
      iss: account.client_email,
      scope: FCM_SCOPE,
      aud: TOKEN_URI,
      iat: START / 1000,
      exp: START / 1000 + 3600,
    });
  });

  it('caches the token until 5 minutes before it expires', async () => {
    const { fetch, exchanges } = endpoint((n) => granted(`ya29.${n}`, 3600));
    const { clock, tokens } = source(fetch);
    expect(await tokens.get()).toBe('ya29.0');
    clock.now = START + 55 * MINUTE - 1;
    expect(await tokens.get()).toBe('ya29.0');
    clock.now = START + 55 * MINUTE;
    expect(await tokens.get()).toBe('ya29.1');
    expect(exchanges).toHaveLength(2);
  });

  it('refreshes short-lived tokens at half their lifetime', async () => {
    const { fetch, exchanges } = endpoint((n) => granted(`ya29.${n}`, 300));
    const { clock, tokens } = source(fetch);
    await tokens.get();
    clock.now = START + 150_000 - 1;
    expect(await tokens.get()).toBe('ya29.0');
    clock.now = START + 150_000;
    expect(await tokens.get()).toBe('ya29.1');
    expect(exchanges).toHaveLength(2);
  });

  it('shares one in-flight exchange among concurrent callers', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const { fetch, exchanges } = endpoint(async () => {
      await gate;
      return granted('ya29.shared');
    });
    const { tokens } = source(fetch);
    const all = Promise.all(Array.from({ length: 25 }, () => tokens.get()));
    await sleep(20);
    release();
    expect(new Set(await all)).toEqual(new Set(['ya29.shared']));
    expect(exchanges).toHaveLength(1);
    expect(tokens.exchangesMade).toBe(1);
  });

  it('invalidate() forces an exchange; invalidate(old) keeps a newer token', async () => {
    const { fetch, exchanges } = endpoint((n) => granted(`ya29.${n}`));
    const { tokens } = source(fetch);
    await tokens.get();
    tokens.invalidate('ya29.0');
    expect(await tokens.get()).toBe('ya29.1');
    tokens.invalidate('ya29.0');
    expect(await tokens.get()).toBe('ya29.1');
    tokens.invalidate();
    expect(await tokens.get()).toBe('ya29.2');
    expect(exchanges).toHaveLength(3);
  });

  it('reports a refused grant as a permanent FcmAuthError without quoting the request', async () => {
    const { fetch } = endpoint(
      () => new Response(JSON.stringify({ error: 'invalid_grant', error_description: 'Invalid JWT Signature.' }), { status: 400 }),
    );
    const { tokens } = source(fetch);
    const err = (await tokens.get().catch((e: unknown) => e)) as FcmAuthError;
    expect(err).toBeInstanceOf(FcmAuthError);
    expect(err).toMatchObject({ status: 400, transient: false });
    expect(err.message).toContain('invalid_grant');
    expect(err.message).not.toContain('eyJ');
  });

  it('reports endpoint trouble and network errors as transient, and tries again on the next call', async () => {
    const { fetch, exchanges } = endpoint((n) =>
      n === 0 ? new TypeError('fetch failed') : n === 1 ? new Response('busy', { status: 503 }) : n === 2 ? new Response('{}', { status: 200 }) : granted('ya29.ok'),
    );
    const { tokens } = source(fetch);
    await expect(tokens.get()).rejects.toMatchObject({ name: 'FcmAuthError', transient: true });
    await expect(tokens.get()).rejects.toMatchObject({ name: 'FcmAuthError', transient: true, status: 503 });
    // 200 without an access token
    await expect(tokens.get()).rejects.toMatchObject({ name: 'FcmAuthError', transient: true });
    expect(await tokens.get()).toBe('ya29.ok');
    expect(exchanges).toHaveLength(4);
  });

  it('reports an unusable private key without quoting it', async () => {
    const secret = '-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA==\n-----END PRIVATE KEY-----';
    const { fetch, exchanges } = endpoint(() => granted('never'));
    const tokens = new FcmAccessToken({ serviceAccount: { ...account, private_key: secret }, fetch });
    const err = (await tokens.get().catch((e: unknown) => e)) as FcmAuthError;
    expect(err).toMatchObject({ name: 'FcmAuthError', transient: false });
    expect(err.message).not.toContain('c2VjcmV0');
    expect(exchanges).toHaveLength(0);
  });
});

describe('parseServiceAccount', () => {
  it('reads client_email, private_key, token_uri and private_key_id', () => {
    const parsed = parseServiceAccount(JSON.stringify({ type: 'service_account', project_id: 'p', ...account }));
    expect(parsed).toEqual(account);
  });

  it('names a missing field, and never quotes the file', () => {
    expect(() => parseServiceAccount(JSON.stringify({ client_email: 'a@b', private_key: 'SECRET' }))).toThrow(/token_uri/);
    const err = (() => {
      try {
        parseServiceAccount('{"private_key": "SECRET"');
      } catch (e) {
        return e as Error;
      }
    })();
    expect(err).toBeInstanceOf(FcmAuthError);
    expect(err!.message).not.toContain('SECRET');
  });
});
