import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { device, expectJson, sibling, sleep, type Device } from '../support/fixtures.js';
import { waitUntil } from '../support/wait.js';
import { keys } from '../../src/redis/keys.js';
import { tokenHash } from '../../src/push/registry.js';
import { DAY_MS } from '../../src/calls/retention.js';

/**
 * Idle expiry of push registrations (docs/keyspace.md "Push registrations"): a user's
 * registrations hash and the owner keys of its tokens expire together PUSH_REGISTRATION_IDLE_DAYS
 * after the user's last registration write, so an installation nobody opens stops being rung and
 * leaves nothing behind. The window here is a fraction of a day (about 4 s) to wait it out.
 */

const IDLE_DAYS = 0.00005;
const IDLE_MS = Math.round(IDLE_DAYS * DAY_MS);
const KS = { prefix: 'cb', shards: 8 };
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ ROLES: 'api', PUSH_REGISTRATION_IDLE_DAYS: String(IDLE_DAYS) });
});
afterAll(async () => {
  await stack?.stop();
});

let n = 0;
const fcmToken = () => `fcm:${Date.now().toString(36)}-${n++}-APA91bHun4MxP5egoKMwt2KZFBaFUH`;
const voipToken = () => `${Date.now().toString(16)}${(n++).toString(16).padStart(8, '0')}`.padEnd(64, 'b');

async function register(d: Device, kind: 'androidPush' | 'iosVoip', token: string): Promise<void> {
  const body = kind === 'iosVoip' ? { token, appId: 'com.example.app', iosEnvironment: 'production' } : { token, appId: 'com.example.app' };
  expectJson(await d.api.put(`/v1/installations/${d.installationId}/push-tokens/${kind}`, body), 200);
}

/** The key's expiry as an absolute Redis time in ms (-1: none, -2: no key). */
const expiresAt = async (key: string) => Number(await stack.redis.call('PEXPIRETIME', key));

describe('push registrations expire when idle', () => {
  it('carry the idle window; a write of another installation moves every owner key with them; all go after it', async () => {
    const phone = device(stack.url);
    const tablet = sibling(stack.url, phone);
    const [phoneToken, tabletToken] = [fcmToken(), voipToken()];
    const registrations = keys.pushRegistrations(KS, phone.userId);
    const phoneOwner = keys.pushTokenOwner(KS, 'androidPush', tokenHash(phoneToken));
    const tabletOwner = keys.pushTokenOwner(KS, 'iosVoip', tokenHash(tabletToken));

    await register(phone, 'androidPush', phoneToken);
    const first = await expiresAt(registrations);
    const ttl = await stack.redis.pttl(registrations);
    expect(ttl).toBeGreaterThan(IDLE_MS - 1000);
    expect(ttl).toBeLessThanOrEqual(IDLE_MS);
    // The owner key dies at the same instant as the registration that holds its token.
    expect(await expiresAt(phoneOwner)).toBe(first);

    // Later, the user's other installation registers: the phone's owner key moves too.
    await sleep(1200);
    await register(tablet, 'iosVoip', tabletToken);
    const second = await expiresAt(registrations);
    expect(second).toBeGreaterThanOrEqual(first + 1000);
    expect(await expiresAt(phoneOwner)).toBe(second);
    expect(await expiresAt(tabletOwner)).toBe(second);
    expect(await stack.redis.hlen(registrations)).toBe(2);

    // Nobody registers again: the registrations and both owner keys are gone after the window.
    await waitUntil(
      'the idle registrations and their owner keys to expire',
      async () => (await stack.redis.exists(registrations, phoneOwner, tabletOwner)) === 0,
      IDLE_MS + 5000,
    );
  });

  it('a worker starting gives registrations written before idle expiry their TTL, with their owner keys, and deletes owner keys no registration holds', async () => {
    // Written as a version before idle expiry left them: no TTLs.
    const user = `old-${n++}`;
    const registrations = keys.pushRegistrations(KS, user);
    const token = fcmToken();
    await stack.redis.hset(registrations, `phone\nandroidPush`, JSON.stringify({ token, tokenHash: tokenHash(token), appId: 'com.example.app', updatedAtMs: '1' }));
    const held = keys.pushTokenOwner(KS, 'androidPush', tokenHash(token));
    // The phone's earlier token, and a token of an installation since signed out.
    const replaced = keys.pushTokenOwner(KS, 'androidPush', tokenHash(fcmToken()));
    const signedOut = keys.pushTokenOwner(KS, 'iosVoip', tokenHash(voipToken()));
    await stack.redis.set(held, `${user}\nphone`);
    await stack.redis.set(replaced, `${user}\nphone`);
    await stack.redis.set(signedOut, `${user}\ntablet`);

    // A day here, so the checks below cannot race the window.
    await stack.addServer({ ROLES: 'worker', PUSH_REGISTRATION_IDLE_DAYS: '1' });
    await waitUntil('the worker to finish', async () => (await stack.redis.exists(keys.migrationDone(KS, 'push-idle-expiry'))) === 1, 15_000);
    const expiry = await expiresAt(registrations);
    expect(expiry).toBeGreaterThan(0);
    expect(await stack.redis.pttl(registrations)).toBeGreaterThan(DAY_MS - 60_000);
    expect(await stack.redis.pttl(registrations)).toBeLessThanOrEqual(DAY_MS);
    expect(await expiresAt(held)).toBe(expiry);
    expect(await stack.redis.exists(replaced, signedOut)).toBe(0);
  });
});
