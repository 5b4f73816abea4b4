import { describe, expect, it } from 'vitest';
import { answer, device, end, uid, type Device } from '../support/fixtures.js';
import { createCall, waitUntil } from './helpers.js';
import {
  androidToken,
  apnsTo,
  callpayloadOf,
  fcmTo,
  logRecords,
  registerAndroid,
  registerIos,
  isRegistered,
  pushesSettled,
  startPushStack,
  type PushStack,
  phone,
  invitesTo as invitesToFake,
  type Phone,
  type TokenKind,
} from './push-helpers.js';
import { forFile } from '../support/stack.js';

/**
 * Tokens a provider reports invalid are removed (docs/protocol.md "What is not sent, retries and invalid tokens"), unless the device registered
 * again meanwhile; and none of the failures leak tokens, credentials or payloads into the logs
 * (docs/protocol.md "Push formats"). The server runs with LOG_LEVEL=debug; the last test reads everything it logged.
 */

let ps: PushStack;
let url: string;
/** Every push token and session token this file handed to the server: none may be logged. */
const secrets = new Set<string>();

forFile(() => startPushStack({ LOG_LEVEL: 'debug' }), (s) => {
  ps = s;
  url = s.url;
});

function inst(baseUrl: string, userId: string, name?: string): Device {
  const d = device(baseUrl, userId, uid('inst'), name);
  secrets.add(d.token);
  return d;
}

/** A phone whose push token and session token go into `secrets`. */
async function secretPhone(userId: string, kind: TokenKind): Promise<Phone> {
  const p = await phone(url, userId, kind);
  secrets.add(p.token).add(p.d.token);
  return p;
}
const iPhone = (userId: string) => secretPhone(userId, 'iosVoip');
const androidPhone = (userId: string) => secretPhone(userId, 'androidPush');
const invitesTo = (token: string) => invitesToFake(ps.fcm, token);


/**
 * Barrier for the handling of an invalid-token answer: the dispatcher logs it after deciding
 * whether to remove the registration (src/push/dispatcher.ts), so once the line is there the
 * registration is in its final state.
 */
async function invalidReportHandled(installationId: string, timeoutMs = 10_000): Promise<void> {
  await waitUntil(`the invalid-token report for ${installationId} to be handled`, () =>
    logRecords(ps.stack.servers.map((s) => s.logs()).join('\n')).some((r) => r.msg === 'push token reported invalid' && r.installationId === installationId),
    timeoutMs,
  );
}

/** A new caller, and a new callee with an iPhone and an Android phone, both registrations stored. */
async function calleeWithBothPhones() {
  const caller = inst(url, uid('caller'));
  const calleeUserId = uid('callee');
  const [ios, android] = [await iPhone(calleeUserId), await androidPhone(calleeUserId)];
  expect(await isRegistered(ps.stack, ios.d, 'iosVoip')).toBe(true);
  expect(await isRegistered(ps.stack, android.d, 'androidPush')).toBe(true);
  return { caller, calleeUserId, ios, android };
}

describe('invalid tokens', () => {
  it('APNs 410 Unregistered removes the registration; the next call sends nothing to it', async () => {
    const { caller, calleeUserId, ios, android } = await calleeWithBothPhones();
    ps.apns.setTokenState(ios.token, 'unregistered');

    const first = await createCall(caller, calleeUserId);
    await waitUntil('the 410', () => apnsTo(ps.apns, ios.token).length >= 1);
    expect(apnsTo(ps.apns, ios.token)[0]).toMatchObject({ status: 410, reason: 'Unregistered' });
    await waitUntil('the registration to go', async () => {
      return !(await isRegistered(ps.stack, ios.d, 'iosVoip'));
    });
    // The installation's other registration is untouched.
    expect(await isRegistered(ps.stack, android.d, 'androidPush')).toBe(true);

    const second = await createCall(caller, calleeUserId);
    await waitUntil('the second Android invitation', () => invitesTo(android.token).length >= 2);
    // Nothing more to the removed token: the second call's VoIP push would have gone out in the
    // same attempt as its Android one, which may still be on its way; a push barrier waits for it.
    await pushesSettled(ps, [first.callId, second.callId]);
    expect(apnsTo(ps.apns, ios.token)).toHaveLength(1);
  });

  it('FCM 404 UNREGISTERED removes the registration; the next call sends nothing to it', async () => {
    const { caller, calleeUserId, ios, android } = await calleeWithBothPhones();
    ps.fcm.setTokenState(android.token, 'unregistered');

    const first = await createCall(caller, calleeUserId);
    await waitUntil('the 404', () => invitesTo(android.token).length >= 1);
    expect(invitesTo(android.token)[0]!.status).toBe(404);
    await waitUntil('the registration to go', async () => {
      return !(await isRegistered(ps.stack, android.d, 'androidPush'));
    });
    expect(await isRegistered(ps.stack, ios.d, 'iosVoip')).toBe(true);

    const second = await createCall(caller, calleeUserId);
    await waitUntil('the second VoIP push', () => apnsTo(ps.apns, ios.token).length >= 2);
    await pushesSettled(ps, [first.callId, second.callId]);
    expect(fcmTo(ps.fcm, android.token)).toHaveLength(1);
  });

  it('APNs: the same token re-registered while the 410 was on its way survives, and rings the next call', async () => {
    const caller = inst(url, uid('caller'));
    const ios = await iPhone(uid('callee'));
    ps.apns.failNext(ios.token, { status: 410, delayMs: 1000 });

    await createCall(caller, ios.d.userId);
    await waitUntil('the push to reach the provider', () => apnsTo(ps.apns, ios.token).length >= 1);
    // The app starts and registers its (same) token again while the answer is still pending.
    await registerIos(ios.d, ios.token);
    await invalidReportHandled(ios.d.installationId);
    expect(apnsTo(ps.apns, ios.token).map((r) => r.status)).toEqual([410]);
    expect(await isRegistered(ps.stack, ios.d, 'iosVoip')).toBe(true);

    const next = await createCall(caller, ios.d.userId);
    await waitUntil('the next push', () => apnsTo(ps.apns, ios.token).length >= 2);
    const second = apnsTo(ps.apns, ios.token)[1]!;
    expect(second.status).toBe(200);
    expect((second.body as { callpayload: { callId: string } }).callpayload.callId).toBe(next.callId);
  });

  it('FCM: a new token registered while the 404 for the old one was on its way survives, and rings the next call', async () => {
    const caller = inst(url, uid('caller'));
    const android = await androidPhone(uid('callee'));
    ps.fcm.failNext(android.token, { status: 404, errorCode: 'UNREGISTERED', delayMs: 1000 });

    await createCall(caller, android.d.userId);
    await waitUntil('the message to reach the provider', () => fcmTo(ps.fcm, android.token).length >= 1);
    const renewed = androidToken();
    secrets.add(renewed);
    await registerAndroid(android.d, renewed);
    await invalidReportHandled(android.d.installationId);
    expect(fcmTo(ps.fcm, android.token).map((m) => m.status)).toEqual([404]);
    expect(await isRegistered(ps.stack, android.d, 'androidPush')).toBe(true);

    const next = await createCall(caller, android.d.userId);
    await waitUntil('the next invitation', () => invitesTo(renewed).length >= 1);
    expect(invitesTo(renewed)[0]!.status).toBe(200);
    expect(callpayloadOf(invitesTo(renewed)[0]!).callId).toBe(next.callId);
    expect(fcmTo(ps.fcm, android.token)).toHaveLength(1);
  });
});

describe('logs', () => {
  it('LOG_LEVEL=debug, a full call with pushes and token failures: no push token, credential, session token or payload in any log line', async () => {
    const displayName = `Zelda Quasar ${uid('name').slice(-12)}`;
    const callerUserId = uid('caller');
    const caller = inst(url, callerUserId, displayName);
    const callerAndroid = await androidPhone(callerUserId);
    const calleeUserId = uid('callee');
    const [gone, bad, throttled, winner, other] = [
      await iPhone(calleeUserId),
      await androidPhone(calleeUserId),
      await androidPhone(calleeUserId),
      await androidPhone(calleeUserId),
      await iPhone(calleeUserId),
    ];
    ps.apns.setTokenState(gone.token, 'unregistered');
    ps.fcm.setTokenState(bad.token, 'invalid');
    ps.fcm.failNext(throttled.token, { status: 429, retryAfterSeconds: 1 });
    // A refusal that is not about the token: the push is given up and logged as rejected.
    ps.apns.failNext(other.token, { status: 400, reason: 'BadPriority' });

    const call = await createCall(caller, calleeUserId);
    await waitUntil(
      'every invitation attempt',
      () =>
        apnsTo(ps.apns, gone.token).length >= 1 &&
        apnsTo(ps.apns, other.token).length >= 1 &&
        invitesTo(bad.token).length >= 1 &&
        invitesTo(throttled.token).length >= 2 &&
        invitesTo(winner.token).length >= 1,
      8000,
    );
    expect((await answer(winner.d, call.callId)).status).toBe(200);
    await waitUntil('the signals', () => fcmTo(ps.fcm, callerAndroid.token, 'call.accepted').length >= 1 && fcmTo(ps.fcm, throttled.token, 'call.ended').length >= 1);
    expect((await end(caller, call.callId, 'localHangup')).status).toBe(200);
    await waitUntil('the invalid registrations to go', async () => {
      const [a, b] = await Promise.all([isRegistered(ps.stack, gone.d, 'iosVoip'), isRegistered(ps.stack, bad.d, 'androidPush')]);
      return !a && !b;
    });
    // Barrier: both reports and the rejection are logged after they were handled.
    await Promise.all([invalidReportHandled(gone.d.installationId), invalidReportHandled(bad.d.installationId)]);
    await waitUntil('the rejection to be logged', () =>
      logRecords(ps.stack.servers.map((s) => s.logs()).join('\n')).some((r) => r.msg === 'push rejected' && r.installationId === other.d.installationId),
    );

    const logs = ps.stack.servers.map((s) => s.logs()).join('\n');
    const records = logRecords(logs);
    // The failures were logged (so the logs were looked at), by installation, not by token.
    const invalid = records.filter((r) => r.msg === 'push token reported invalid');
    expect(invalid.map((r) => r.installationId)).toEqual(expect.arrayContaining([gone.d.installationId, bad.d.installationId]));
    expect(records.some((r) => r.msg === 'push rejected' && r.installationId === other.d.installationId)).toBe(true);

    const credentials = new Set<string>();
    for (const r of [...ps.apns.requests, ...ps.apnsSandbox.requests]) {
      const jwt = r.headers.authorization?.split(' ')[1];
      if (jwt) credentials.add(jwt);
    }
    for (const m of ps.fcm.messages) if (m.accessToken) credentials.add(m.accessToken);
    for (const t of ps.fcm.tokenRequests) if (t.form['assertion']) credentials.add(t.form['assertion']);
    expect(credentials.size).toBeGreaterThanOrEqual(3);
    const keyMaterial = [ps.key.privateKeyPem, ps.fcm.serviceAccount.json.private_key].flatMap((pem) =>
      pem.split('\n').filter((line) => line.length >= 40 && !line.startsWith('-----')),
    );

    const leaks: string[] = [];
    const check = (what: string, value: string) => {
      if (logs.includes(value)) leaks.push(`${what}: …${value.slice(-8)}`);
    };
    for (const s of secrets) check('push or session token', s);
    for (const c of credentials) check('provider credential', c);
    for (const k of keyMaterial) check('private key', k);
    check('payload key', 'callpayload');
    check('display name', displayName);
    check('invitation eventId', `${call.callId}:${call.snapshot.revision}:invited`);
    expect(leaks).toEqual([]);
    expect(secrets.size).toBeGreaterThan(20);
  });
});
