import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/redis/keys.js';
import { tokenHash } from '../../src/push/registry.js';
import { REGISTRATIONS_MOVE } from '../../src/push/legacyRegistrations.js';
import { device, uid, type Device } from '../support/fixtures.js';
import { createCall, waitUntil } from './helpers.js';
import { androidToken, apnsTo, BUNDLE_ID, callpayloadOf, fcmTo, iosToken, PREFIX, pushesSettled, registerIos, startPushStack, type PushStack } from './push-helpers.js';

/**
 * Upgrading from 0.1.0 (docs/operations.md "Upgrading"): the push registrations it stored (a hash per
 * installation and kind, indexed in the user's devices set) are moved into the user's
 * registrations hash by a worker at its start, so the devices registered before the upgrade
 * keep ringing; a registration made since in the new form wins over its old one.
 */

const KS = { prefix: PREFIX, shards: 8 };
let ps: PushStack;

beforeAll(async () => {
  ps = await startPushStack();
});
afterAll(async () => {
  await ps?.stop();
});

/** Writes one registration the way 0.1.0 stored it. */
async function storeAs010(d: Device, kind: 'iosVoip' | 'androidPush', token: string): Promise<void> {
  const fields: Record<string, string> = { token, tokenHash: tokenHash(token), appId: BUNDLE_ID, updatedAtMs: String(Date.now() - 60_000) };
  if (kind === 'iosVoip') fields.iosEnvironment = 'production';
  await ps.stack.redis.hset(keys.legacyPushRegistration(KS, d.userId, d.installationId, kind), fields);
  await ps.stack.redis.sadd(keys.legacyDevices(KS, d.userId), `${d.installationId}\n${kind}`);
}

describe('upgrade from 0.1.0', () => {
  it("a worker starting moves 0.1.0's registrations; they ring, and one registered again since keeps its new token", async () => {
    const calleeUserId = uid('callee');
    const phone = device(ps.url, calleeUserId, uid('phone'));
    const tablet = device(ps.url, calleeUserId, uid('tablet'));
    const [phoneToken, tabletOld, tabletNew] = [androidToken(), iosToken(), iosToken()];
    await storeAs010(phone, 'androidPush', phoneToken);
    await storeAs010(tablet, 'iosVoip', tabletOld);
    // The tablet registered again after the upgrade, before the move.
    await registerIos(tablet, tabletNew);

    // The first worker found nothing to move when it started; a worker starting now moves them.
    await ps.stack.redis.del(keys.migrationDone(KS, REGISTRATIONS_MOVE));
    await ps.stack.addServer({ ...ps.pushEnv, ROLES: 'worker' });
    // Done once the worker marks it done: the last registration leaves the old set in its script,
    // and the owner keys' expiries move after that script, in the same pass (src/push/legacyRegistrations.ts).
    await waitUntil('the move', async () => (await ps.stack.redis.exists(keys.migrationDone(KS, REGISTRATIONS_MOVE))) === 1);
    expect(await ps.stack.redis.exists(keys.legacyDevices(KS, calleeUserId))).toBe(0);
    expect(await ps.stack.redis.exists(keys.legacyPushRegistration(KS, calleeUserId, phone.installationId, 'androidPush'))).toBe(0);
    expect(await ps.stack.redis.exists(keys.legacyPushRegistration(KS, calleeUserId, tablet.installationId, 'iosVoip'))).toBe(0);
    // The moved registrations expire like any written now, and the owner key of the one written
    // since at the same instant (docs/keyspace.md "Push registrations").
    const expiresAt = async (key: string) => Number(await ps.stack.redis.call('PEXPIRETIME', key));
    const expiry = await expiresAt(keys.pushRegistrations(KS, calleeUserId));
    expect(expiry).toBeGreaterThan(Date.now());
    expect(await expiresAt(keys.pushTokenOwner(KS, 'iosVoip', tokenHash(tabletNew)))).toBe(expiry);

    const call = await createCall(device(ps.url, uid('caller')), calleeUserId);
    await waitUntil('both invitations', () => fcmTo(ps.fcm, phoneToken).length >= 1 && apnsTo(ps.apns, tabletNew).length >= 1);
    await pushesSettled(ps, [call.callId]);
    expect(callpayloadOf(fcmTo(ps.fcm, phoneToken)[0]!)).toMatchObject({ type: 'call.invited', callId: call.callId });
    expect(apnsTo(ps.apns, tabletNew)[0]!.status).toBe(200);
    expect(apnsTo(ps.apns, tabletOld)).toHaveLength(0);
  });
});
