import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { decodeProtectedHeader, jwtVerify } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  ApnsKeyError,
  ApnsProviderToken,
  DEFAULT_REFRESH_MS,
  MAX_REFRESH_MS,
  MIN_REFRESH_MS,
} from '../../src/push/apnsProviderToken.js';

const MINUTE = 60_000;
const START = Date.UTC(2025, 0, 1, 12, 0, 0);

let keyPem: string;
let publicKey: KeyObject;

beforeAll(() => {
  const pair = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  keyPem = pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  publicKey = pair.publicKey;
});

function tokenAt(options: { refreshAfterMs?: number } = {}) {
  const clock = { now: START };
  const token = new ApnsProviderToken({ keyPem, keyId: 'KEY1234567', teamId: 'TEAM123456', now: () => clock.now, ...options });
  return { clock, token };
}

describe('ApnsProviderToken', () => {
  it('signs an ES256 JWT with kid, iss = team ID and iat in seconds from the clock, and nothing else', async () => {
    const { token } = tokenAt();
    const jwt = await token.get();
    expect(decodeProtectedHeader(jwt)).toEqual({ alg: 'ES256', kid: 'KEY1234567' });
    const { payload } = await jwtVerify(jwt, publicKey, { algorithms: ['ES256'], currentDate: new Date(START) });
    expect(payload).toEqual({ iss: 'TEAM123456', iat: START / 1000 });
  });

  it('reuses one token until the default refresh age of 30 minutes', async () => {
    const { clock, token } = tokenAt();
    const first = await token.get();
    clock.now = START + DEFAULT_REFRESH_MS - 1;
    expect(await token.get()).toBe(first);
    expect(token.tokensSigned).toBe(1);

    clock.now = START + DEFAULT_REFRESH_MS;
    const second = await token.get();
    expect(second).not.toBe(first);
    expect(token.tokensSigned).toBe(2);
    const { payload } = await jwtVerify(second, publicKey, { currentDate: new Date(clock.now) });
    expect(payload.iat).toBe((START + DEFAULT_REFRESH_MS) / 1000);
  });

  it('counts the age from the whole second in iat', async () => {
    const { clock, token } = tokenAt({ refreshAfterMs: MIN_REFRESH_MS });
    clock.now = START + 900; // iat = START/1000
    const first = await token.get();
    clock.now = START + MIN_REFRESH_MS - 1;
    expect(await token.get()).toBe(first);
    clock.now = START + MIN_REFRESH_MS;
    expect(await token.get()).not.toBe(first);
  });

  it('honours a configured refresh age between 20 and 60 minutes', async () => {
    const { clock, token } = tokenAt({ refreshAfterMs: 50 * MINUTE });
    const first = await token.get();
    clock.now = START + 49 * MINUTE;
    expect(await token.get()).toBe(first);
    clock.now = START + 50 * MINUTE;
    expect(await token.get()).not.toBe(first);
  });

  it('refuses refresh ages APNs would reject: under 20 minutes (throttled) or over 60 (expired)', () => {
    expect(() => tokenAt({ refreshAfterMs: MIN_REFRESH_MS - 1 })).toThrow(RangeError);
    expect(() => tokenAt({ refreshAfterMs: MAX_REFRESH_MS + 1 })).toThrow(RangeError);
    expect(() => tokenAt({ refreshAfterMs: 0 })).toThrow(RangeError);
    expect(() => tokenAt({ refreshAfterMs: Number.NaN })).toThrow(RangeError);
    expect(() => tokenAt({ refreshAfterMs: MIN_REFRESH_MS })).not.toThrow();
    expect(() => tokenAt({ refreshAfterMs: MAX_REFRESH_MS })).not.toThrow();
  });

  it('never hands out a token as old as 60 minutes, even at the longest refresh age', async () => {
    const { clock, token } = tokenAt({ refreshAfterMs: MAX_REFRESH_MS });
    const first = await token.get();
    clock.now = START + 60 * MINUTE;
    expect(await token.get()).not.toBe(first);
  });

  it('invalidate() forces a new token on next use', async () => {
    const { clock, token } = tokenAt();
    const first = await token.get();
    clock.now = START + MINUTE;
    token.invalidate();
    const second = await token.get();
    expect(second).not.toBe(first);
    const { payload } = await jwtVerify(second, publicKey, { currentDate: new Date(clock.now) });
    expect(payload.iat).toBe((START + MINUTE) / 1000);
  });

  it('invalidate(rejected) ignores a token that was already replaced', async () => {
    const { token } = tokenAt();
    const first = await token.get();
    token.invalidate(first);
    const second = await token.get();
    // A second push rejected with the old token must not discard the new one.
    token.invalidate(first);
    expect(await token.get()).toBe(second);
    expect(token.tokensSigned).toBe(2);
  });

  it('concurrent callers share one signature', async () => {
    const { token } = tokenAt();
    const jwts = await Promise.all(Array.from({ length: 20 }, () => token.get()));
    expect(new Set(jwts).size).toBe(1);
    expect(token.tokensSigned).toBe(1);
  });

  it('signs a new token when the clock went back', async () => {
    const { clock, token } = tokenAt();
    const first = await token.get();
    clock.now = START - 10 * MINUTE;
    expect(await token.get()).not.toBe(first);
  });

  it('reports an unusable key without quoting it', async () => {
    const secret = 'not-a-key-but-secret-material';
    const token = new ApnsProviderToken({ keyPem: secret, keyId: 'K', teamId: 'T' });
    const err = await token.get().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApnsKeyError);
    expect(String((err as Error).message)).not.toContain(secret);
  });
});
