import { describe, expect, it } from 'vitest';
import { stackForFile, type Stack } from '../support/stack.js';
import { device, expectJson, sibling, type Device } from '../support/fixtures.js';
import { keys } from '../../src/redis/keys.js';
import { registrationField, tokenHash } from '../../src/push/registry.js';
import { DAY_MS } from '../../src/calls/retention.js';

/**
 * Push token registration (docs/api.md "API", docs/protocol.md "Push formats"):
 * PUT returns the saved registration without the token (only its last 6 characters), DELETE is
 * 204, a token registered from another installation moves there, and tokens are never logged.
 * Stored state is checked directly in Redis.
 */

const KS = { prefix: 'cb', shards: 8 };
let stack: Stack;
let url: string;
const usedTokens: string[] = [];

// debug: the most verbose level, so the log check below sees everything the server would log.
stackForFile({ ROLES: 'api', LOG_LEVEL: 'debug' }, (s) => {
  stack = s;
  url = s.url;
});

let counter = 0;
/** A fresh 64-hex-digit VoIP device token. */
function voipToken(): string {
  const t = (Date.now().toString(16) + (counter++).toString(16).padStart(8, '0')).padEnd(64, 'a').slice(0, 64);
  usedTokens.push(t);
  return t;
}
function fcmToken(): string {
  const t = `fcm:${Math.random().toString(36).slice(2)}-${counter++}-APA91bHun4MxP5egoKMwt2KZFBaFUH`;
  usedTokens.push(t);
  return t;
}

const path = (d: Device, kind: string) => `/v1/installations/${encodeURIComponent(d.installationId)}/push-tokens/${kind}`;
/** One installation's stored registration ({} when absent), and the installations/kinds a user has registered. */
const registration = async (d: Device, kind: string): Promise<Record<string, string>> =>
  JSON.parse((await stack.redis.hget(keys.pushRegistrations(KS, d.userId), registrationField(d.installationId, kind))) ?? '{}');
const devices = (userId: string) => stack.redis.hkeys(keys.pushRegistrations(KS, userId));
const owner = (kind: string, token: string) => stack.redis.get(keys.pushTokenOwner(KS, kind, tokenHash(token)));

describe('PUT /v1/installations/{id}/push-tokens/{kind}', () => {
  it('iosVoip: returns {installationId, kind, appId, iosEnvironment, tokenSuffix, updatedAtMs} and never echoes the token', async () => {
    const d = device(url);
    const token = voipToken();
    const before = Date.now();

    const res = await d.api.put(path(d, 'iosVoip'), { token, appId: 'com.example.app', iosEnvironment: 'development' });

    expectJson(res, 200);
    expect(Object.keys(res.json)).toEqual(['installationId', 'kind', 'appId', 'iosEnvironment', 'tokenSuffix', 'updatedAtMs']);
    expect(res.json).toEqual({
      installationId: d.installationId,
      kind: 'iosVoip',
      appId: 'com.example.app',
      iosEnvironment: 'development',
      tokenSuffix: token.slice(-6),
      updatedAtMs: expect.any(Number),
    });
    expect(res.json.updatedAtMs).toBeGreaterThanOrEqual(before - 1000);
    expect(res.json.updatedAtMs).toBeLessThanOrEqual(Date.now() + 1000);
    expect(res.text).not.toContain(token);
    expect(res.text).not.toContain(token.slice(0, 16));

    // Stored under the user, indexed for fan-out, owned by this installation.
    expect(await registration(d, 'iosVoip')).toEqual({
      token,
      tokenHash: tokenHash(token),
      appId: 'com.example.app',
      iosEnvironment: 'development',
      updatedAtMs: String(res.json.updatedAtMs),
    });
    expect(await devices(d.userId)).toEqual([`${d.installationId}\niosVoip`]);
    // Kept PUSH_REGISTRATION_IDLE_DAYS (270 by default) from this write, the owner key as long
    // (docs/keyspace.md "Push registrations"; test/integration/push-idle-expiry.test.ts waits one out).
    const expiry = Number(await stack.redis.call('PEXPIRETIME', keys.pushRegistrations(KS, d.userId)));
    expect(expiry - Date.now()).toBeGreaterThan(269 * DAY_MS);
    expect(expiry - Date.now()).toBeLessThanOrEqual(270 * DAY_MS + 1000);
    expect(Number(await stack.redis.call('PEXPIRETIME', keys.pushTokenOwner(KS, 'iosVoip', tokenHash(token))))).toBe(expiry);
    expect(await owner('iosVoip', token)).toBe(`${d.userId}\n${d.installationId}`);
  });

  it('androidPush: no iosEnvironment in the response or the store', async () => {
    const d = device(url);
    const token = fcmToken();
    const res = await d.api.put(path(d, 'androidPush'), { token, appId: 'com.example.app' });
    expectJson(res, 200);
    expect(res.json).toEqual({
      installationId: d.installationId,
      kind: 'androidPush',
      appId: 'com.example.app',
      tokenSuffix: token.slice(-6),
      updatedAtMs: expect.any(Number),
    });
    expect(res.text).not.toContain(token);
    const stored = await registration(d, 'androidPush');
    expect(stored.token).toBe(token);
    expect(stored.iosEnvironment).toBeUndefined();
  });

  it('registering again replaces the installation’s registration of that kind; the other kind is kept', async () => {
    const d = device(url);
    const first = voipToken();
    const second = voipToken();
    const android = fcmToken();
    expect((await d.api.put(path(d, 'iosVoip'), { token: first, appId: 'com.example.app', iosEnvironment: 'production' })).status).toBe(200);
    expect((await d.api.put(path(d, 'androidPush'), { token: android, appId: 'com.example.app' })).status).toBe(200);

    const res = await d.api.put(path(d, 'iosVoip'), { token: second, appId: 'com.example.app', iosEnvironment: 'development' });

    expectJson(res, 200);
    expect(res.json).toMatchObject({ iosEnvironment: 'development', tokenSuffix: second.slice(-6) });
    expect(await registration(d, 'iosVoip')).toMatchObject({ token: second, iosEnvironment: 'development' });
    expect((await registration(d, 'androidPush')).token).toBe(android);
    expect((await devices(d.userId)).sort()).toEqual([`${d.installationId}\nandroidPush`, `${d.installationId}\niosVoip`]);
  });
});

describe('DELETE /v1/installations/{id}/push-tokens/{kind}', () => {
  it('→ 204 with no body; the registration is gone; deleting again is also 204', async () => {
    const d = device(url);
    const token = voipToken();
    const android = fcmToken();
    await d.api.put(path(d, 'iosVoip'), { token, appId: 'com.example.app', iosEnvironment: 'production' });
    await d.api.put(path(d, 'androidPush'), { token: android, appId: 'com.example.app' });

    const res = await d.api.del(path(d, 'iosVoip'));

    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect(await registration(d, 'iosVoip')).toEqual({});
    expect(await devices(d.userId)).toEqual([`${d.installationId}\nandroidPush`]);
    expect((await registration(d, 'androidPush')).token).toBe(android);

    const again = await d.api.del(path(d, 'iosVoip'));
    expect(again.status).toBe(204);
    expect(again.text).toBe('');
  });
});

describe("a token's owner key lives as long as a registration holds the token (docs/keyspace.md)", () => {
  it('a replaced token and a deleted registration leave no owner key; a moved token keeps its new owner', async () => {
    const d = device(url);
    const first = voipToken();
    const second = voipToken();
    const put = (dev: Device, token: string) => dev.api.put(path(dev, 'iosVoip'), { token, appId: 'com.example.app', iosEnvironment: 'production' });
    expect((await put(d, first)).status).toBe(200);
    expect(await owner('iosVoip', first)).toBe(`${d.userId}\n${d.installationId}`);
    expect((await put(d, second)).status).toBe(200);
    expect(await owner('iosVoip', first)).toBeNull();
    expect(await owner('iosVoip', second)).toBe(`${d.userId}\n${d.installationId}`);
    // The same token again keeps its owner key.
    expect((await put(d, second)).status).toBe(200);
    expect(await owner('iosVoip', second)).toBe(`${d.userId}\n${d.installationId}`);

    // Moved to another installation: the old one's removal does not take the new owner's key.
    const other = device(url);
    expect((await put(other, second)).status).toBe(200);
    expect(await owner('iosVoip', second)).toBe(`${other.userId}\n${other.installationId}`);
    expect((await d.api.del(path(d, 'iosVoip'))).status).toBe(204);
    expect(await owner('iosVoip', second)).toBe(`${other.userId}\n${other.installationId}`);

    expect((await other.api.del(path(other, 'iosVoip'))).status).toBe(204);
    expect(await owner('iosVoip', second)).toBeNull();
  });
});

describe('rebinding a token to another installation', () => {
  it('the same token registered from another installation of another user moves there (the old registration is gone)', async () => {
    const alice = device(url);
    const bob = device(url);
    const token = voipToken();
    expect((await alice.api.put(path(alice, 'iosVoip'), { token, appId: 'com.example.app', iosEnvironment: 'production' })).status).toBe(200);

    const res = await bob.api.put(path(bob, 'iosVoip'), { token, appId: 'com.example.app', iosEnvironment: 'production' });

    expectJson(res, 200);
    expect(res.json.installationId).toBe(bob.installationId);
    expect(await registration(alice, 'iosVoip')).toEqual({});
    expect(await devices(alice.userId)).toEqual([]);
    expect((await registration(bob, 'iosVoip')).token).toBe(token);
    expect(await devices(bob.userId)).toEqual([`${bob.installationId}\niosVoip`]);
    expect(await owner('iosVoip', token)).toBe(`${bob.userId}\n${bob.installationId}`);

    // And back again.
    expect((await alice.api.put(path(alice, 'iosVoip'), { token, appId: 'com.example.app', iosEnvironment: 'production' })).status).toBe(200);
    expect(await registration(bob, 'iosVoip')).toEqual({});
    expect((await registration(alice, 'iosVoip')).token).toBe(token);
  });

  it('moves between installations of the same user too', async () => {
    const phone = device(url);
    const reinstalled = sibling(url, phone);
    const token = fcmToken();
    await phone.api.put(path(phone, 'androidPush'), { token, appId: 'com.example.app' });
    expect((await reinstalled.api.put(path(reinstalled, 'androidPush'), { token, appId: 'com.example.app' })).status).toBe(200);
    expect(await registration(phone, 'androidPush')).toEqual({});
    expect(await devices(phone.userId)).toEqual([`${reinstalled.installationId}\nandroidPush`]);
  });

  it('an installation that has since registered another token keeps it', async () => {
    const alice = device(url);
    const bob = device(url);
    const old = voipToken();
    const current = voipToken();
    await alice.api.put(path(alice, 'iosVoip'), { token: old, appId: 'com.example.app', iosEnvironment: 'production' });
    await alice.api.put(path(alice, 'iosVoip'), { token: current, appId: 'com.example.app', iosEnvironment: 'production' });

    // Bob's phone now holds Alice's old token (e.g. the device changed hands).
    expect((await bob.api.put(path(bob, 'iosVoip'), { token: old, appId: 'com.example.app', iosEnvironment: 'production' })).status).toBe(200);

    expect((await registration(alice, 'iosVoip')).token).toBe(current);
    expect(await devices(alice.userId)).toEqual([`${alice.installationId}\niosVoip`]);
  });
});

describe('logging', () => {
  it('push tokens never appear in the server’s logs', async () => {
    expect(usedTokens.length).toBeGreaterThan(5);
    const logs = stack.servers[0]!.logs();
    for (const t of usedTokens) expect(logs).not.toContain(t);
  });
});
