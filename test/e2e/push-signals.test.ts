import { describe, expect, it } from 'vitest';
import type { FcmRecordedMessage } from '../support/fcm-server.js';
import type { TestServer } from '../support/server.js';
import { answer, end, eventsUntil, headCursor, sameShardCallId, uid } from '../support/fixtures.js';
import { SIGNAL_TTL_MS } from '../../src/push/planner.js';
import { acceptedAt, createCall, endedAt, expectAccepted, expectEnded, waitUntil } from './helpers.js';
import { withoutAlerts,
  apnsTo,
  callpayloadOf,
  fcmTo,
  pushesSettled,
  ttlSeconds,
  type PushStack,
  installation,
  phone,
  type Phone as RegisteredPhone,
  type TokenKind,
  pushStackForFile,
} from './push-helpers.js';

/**
 * Android push signals (docs/protocol.md "Android push signals"): when a call stops ringing, the callee's Android installations
 * that are told over signaling also get a NORMAL data message with the same `call.ended` JSON; the
 * caller's Android installations get `call.accepted`. iOS never gets a signal: every VoIP push must
 * ring, so the iOS fake sees invitations only.
 */

let ps: PushStack;
let url: string;
/** An api-only process on the same Redis whose calls ring for 2 s. */
let short: TestServer;

pushStackForFile([2000], (s, [a]) => {
  [ps, url, short] = [s, s.url, a!];
});

/** A phone and its log's head when it registered: the events it gets come after. */
interface Phone extends RegisteredPhone {
  cursor: string;
}

async function phoneAt(userId: string, kind: TokenKind, baseUrl: string): Promise<Phone> {
  const p = await phone(baseUrl, userId, kind);
  return { ...p, cursor: await headCursor(p.d) };
}
const androidPhone = (userId: string, baseUrl = url) => phoneAt(userId, 'androidPush', baseUrl);
const iPhone = (userId: string, baseUrl = url) => phoneAt(userId, 'iosVoip', baseUrl);

/** A NORMAL data message: exact body shape, no notification, a ttl within the signal's minute. */
function expectSignalMessage(m: FcmRecordedMessage, token: string, occurredAtMs: number): Record<string, any> {
  expect(m.status, JSON.stringify(m.response)).toBe(200);
  expect(m.body).toEqual({
    message: { token, android: { priority: 'NORMAL', ttl: expect.stringMatching(/^\d+s$/) }, data: { callpayload: expect.any(String) } },
  });
  expect(JSON.stringify(m.body)).not.toContain('notification');
  const ttl = ttlSeconds(m);
  expect(ttl).toBeLessThanOrEqual(SIGNAL_TTL_MS / 1000);
  expect(ttl).toBeGreaterThanOrEqual(Math.max(1, Math.floor((occurredAtMs + SIGNAL_TTL_MS - m.receivedAtMs) / 1000)));
  return callpayloadOf(m);
}

/** The device's event of `type` from the event log (what signaling delivers). */
async function loggedEvent(p: Phone, type: string): Promise<Record<string, any>> {
  const events = await eventsUntil(p.d, p.cursor, (e) => e.some((x) => x.type === type));
  return events.find((x) => x.type === type) as Record<string, any>;
}

describe('caller cancels', () => {
  it('every callee Android installation gets call.ended callerCancelled (NORMAL, the signaling JSON); iOS only ever got the invitation', async () => {
    const caller = await androidPhone(uid('caller'));
    const calleeUserId = uid('callee');
    const [a1, a2, ios] = [await androidPhone(calleeUserId), await androidPhone(calleeUserId), await iPhone(calleeUserId)];
    const call = await createCall(caller.d, calleeUserId);
    await waitUntil('the invitations', () => [a1, a2].every((p) => fcmTo(ps.fcm, p.token).length >= 1) && apnsTo(ps.apns, ios.token).length >= 1);

    const ended = await end(caller.d, call.callId, 'localHangup');
    expect(ended.status, ended.text).toBe(200);
    await waitUntil('the cancel signals', () => [a1, a2].every((p) => fcmTo(ps.fcm, p.token, 'call.ended').length >= 1));
    await pushesSettled(ps, [call.callId]);

    for (const p of [a1, a2]) {
      const all = withoutAlerts(fcmTo(ps.fcm, p.token));
      expect(all.map((m) => callpayloadOf(m).type)).toEqual(['call.invited', 'call.ended']);
      const payload = expectSignalMessage(all[1]!, p.token, ended.json.endedAtMs as number);
      expectEnded(payload as never, 'callerCancelled', endedAt(ended.json));
      expect(payload).toEqual(await loggedEvent(p, 'call.ended'));
      expect(payload).toMatchObject({ schemaVersion: 1, type: 'call.ended', callId: call.callId, reason: 'callerCancelled' });
    }
    const iosRequests = apnsTo(ps.apns, ios.token);
    expect(iosRequests).toHaveLength(1);
    expect((iosRequests[0]!.body as { callpayload: { type: string } }).callpayload.type).toBe('call.invited');
    // The caller's own Android installation is not signalled about its own cancel.
    expect(fcmTo(ps.fcm, caller.token)).toHaveLength(0);
  });
});

describe('answered on one device', () => {
  it('the other callee Android installations get answeredElsewhere, the caller’s Android installations get call.accepted (both NORMAL); the winner and iOS get nothing; the hang-up sends no signal', async () => {
    const callerUserId = uid('caller');
    const callerAndroid = await androidPhone(callerUserId);
    const callerIos = await iPhone(callerUserId);
    const calleeUserId = uid('callee');
    const [winner, loser, calleeIos] = [await androidPhone(calleeUserId), await androidPhone(calleeUserId), await iPhone(calleeUserId)];

    const call = await createCall(callerAndroid.d, calleeUserId);
    await waitUntil(
      'the invitations',
      () => [winner, loser].every((p) => fcmTo(ps.fcm, p.token).length >= 1) && apnsTo(ps.apns, calleeIos.token).length >= 1,
    );
    const won = await answer(winner.d, call.callId);
    expect(won.status, won.text).toBe(200);

    await waitUntil(
      'answeredElsewhere and call.accepted signals',
      () => fcmTo(ps.fcm, loser.token, 'call.ended').length >= 1 && fcmTo(ps.fcm, callerAndroid.token, 'call.accepted').length >= 1,
    );
    // Hang up: once the call was answered, the devices in it hear it over signaling only.
    const hungUp = await end(callerAndroid.d, call.callId, 'localHangup');
    expect(hungUp.status, hungUp.text).toBe(200);
    await pushesSettled(ps, [call.callId]);

    const toLoser = fcmTo(ps.fcm, loser.token);
    expect(toLoser.map((m) => callpayloadOf(m).type)).toEqual(['call.invited', 'call.ended']);
    const elsewhere = expectSignalMessage(toLoser[1]!, loser.token, won.json.acceptedAtMs as number);
    expectEnded(elsewhere as never, 'answeredElsewhere', acceptedAt(won.json));
    expect(elsewhere).toEqual(await loggedEvent(loser, 'call.ended'));

    const toCaller = fcmTo(ps.fcm, callerAndroid.token);
    expect(toCaller.map((m) => callpayloadOf(m).type)).toEqual(['call.accepted']);
    const accepted = expectSignalMessage(toCaller[0]!, callerAndroid.token, won.json.acceptedAtMs as number);
    expectAccepted(accepted as never, won.json);
    expect(accepted.answeredByInstallationId).toBe(winner.d.installationId);
    expect(accepted).toEqual(await loggedEvent(callerAndroid, 'call.accepted'));

    // The winner learnt its answer from the HTTP response: no signal.
    expect(fcmTo(ps.fcm, winner.token).map((m) => callpayloadOf(m).type)).toEqual(['call.invited']);
    // iOS: the callee's iPhone got its invitation only; the caller's iPhone got nothing at all.
    expect(apnsTo(ps.apns, calleeIos.token)).toHaveLength(1);
    expect(apnsTo(ps.apns, callerIos.token)).toHaveLength(0);
    expect(ps.apnsSandbox.requests.filter((r) => r.token === calleeIos.token || r.token === callerIos.token)).toHaveLength(0);
  });
});

describe('a device registered mid-ring', () => {
  it('was never rung, so it gets no stop-ringing signal; the devices the invitation rang do (docs/architecture.md "Push")', async () => {
    const caller = installation(url, uid('caller'));
    const calleeUserId = uid('callee');
    const rung = await androidPhone(calleeUserId);
    const call = await createCall(caller, calleeUserId);
    await waitUntil('the invitation', () => fcmTo(ps.fcm, rung.token).length >= 1);
    const late = await androidPhone(calleeUserId);

    const ended = await end(caller, call.callId, 'localHangup');
    expect(ended.status, ended.text).toBe(200);
    await waitUntil('the cancel signal', () => fcmTo(ps.fcm, rung.token, 'call.ended').length >= 1);
    await pushesSettled(ps, [call.callId]);
    expect(withoutAlerts(fcmTo(ps.fcm, rung.token)).map((m) => callpayloadOf(m).type)).toEqual(['call.invited', 'call.ended']);
    // The late device gets no signal; as an installation of a callee who missed the call it gets
    // the missed-call alert, as the rung one does (docs/protocol.md "Missed-call alerts").
    expect(fcmTo(ps.fcm, late.token).map((m) => callpayloadOf(m).type)).toEqual(['call.missed']);
    expect(fcmTo(ps.fcm, rung.token, 'call.missed')).toHaveLength(1);
    // Over signaling it is told like any device of the callee.
    expect(await loggedEvent(late, 'call.ended')).toMatchObject({ callId: call.callId, reason: 'callerCancelled' });
  });
});

describe('declined on one device', () => {
  it('the callee’s other Android installation gets the same call.ended as over signaling (NORMAL); the declining one gets none', async () => {
    const caller = installation(url, uid('caller'));
    const calleeUserId = uid('callee');
    const [decliner, other, ios] = [await androidPhone(calleeUserId), await androidPhone(calleeUserId), await iPhone(calleeUserId)];
    const call = await createCall(caller, calleeUserId);
    await waitUntil('the invitations', () => [decliner, other].every((p) => fcmTo(ps.fcm, p.token).length >= 1) && apnsTo(ps.apns, ios.token).length >= 1);

    const declined = await end(decliner.d, call.callId, 'declined');
    expect(declined.status, declined.text).toBe(200);
    await waitUntil('the signal', () => fcmTo(ps.fcm, other.token, 'call.ended').length >= 1);
    await pushesSettled(ps, [call.callId]);

    const toOther = fcmTo(ps.fcm, other.token);
    expect(toOther.map((m) => callpayloadOf(m).type)).toEqual(['call.invited', 'call.ended']);
    const payload = expectSignalMessage(toOther[1]!, other.token, declined.json.endedAtMs as number);
    expect(payload).toEqual(await loggedEvent(other, 'call.ended'));
    expect(payload.callId).toBe(call.callId);
    expect(fcmTo(ps.fcm, decliner.token).map((m) => callpayloadOf(m).type)).toEqual(['call.invited']);
    expect(apnsTo(ps.apns, ios.token)).toHaveLength(1);
  });
});

describe('ring timeout', () => {
  it('an unanswered call sends the callee’s Android installation call.ended unanswered (NORMAL); iOS gets nothing after the invitation', async () => {
    const caller = installation(short.url, uid('caller'));
    const calleeUserId = uid('callee');
    const [android, ios] = [await androidPhone(calleeUserId), await iPhone(calleeUserId)];
    const call = await createCall(caller, calleeUserId);
    expect(call.snapshot.expiresAtMs - call.snapshot.createdAtMs).toBe(2000);

    await waitUntil('the unanswered signal', () => fcmTo(ps.fcm, android.token, 'call.ended').length >= 1, 6000);
    await pushesSettled(ps, [call.callId]);
    const logged = await loggedEvent(android, 'call.ended');
    const all = withoutAlerts(fcmTo(ps.fcm, android.token));
    expect(all.map((m) => callpayloadOf(m).type)).toEqual(['call.invited', 'call.ended']);
    const payload = expectSignalMessage(all[1]!, android.token, logged.occurredAtMs as number);
    expect(payload).toEqual(logged);
    expect(payload).toMatchObject({ type: 'call.ended', callId: call.callId, reason: 'unanswered' });
    expect(payload.occurredAtMs).toBeGreaterThanOrEqual(call.snapshot.expiresAtMs as number);
    expect(apnsTo(ps.apns, ios.token).map((r) => (r.body as { callpayload: { type: string } }).callpayload.type)).toEqual(['call.invited']);
  });
});

describe('a provider slow to answer', () => {
  it("holds back neither another call's invitation on the same outbox shard nor anything else, and a call's cancel signal still goes out only after its invitation was answered", async () => {
    const HOLD_MS = 4000;
    const caller = installation(url, uid('caller'));
    const slow = await androidPhone(uid('callee'));
    const other = await androidPhone(uid('callee'));
    ps.fcm.failNext(slow.token, { status: 200, delayMs: HOLD_MS });
    const first = await createCall(caller, slow.d.userId);
    await waitUntil('the held invitation to reach the provider', () => fcmTo(ps.fcm, slow.token).length >= 1);
    const invitation = fcmTo(ps.fcm, slow.token)[0]!;
    expect(callpayloadOf(invitation)).toMatchObject({ type: 'call.invited', callId: first.callId });

    // A call on the same outbox shard is pushed while the first invitation's answer is held.
    const secondId = sameShardCallId(first.callId);
    await createCall(caller, other.d.userId, { callId: secondId });
    await waitUntil('the other invitation, while the first is held', () => fcmTo(ps.fcm, other.token).length >= 1, HOLD_MS - 1000);
    expect(callpayloadOf(fcmTo(ps.fcm, other.token)[0]!)).toMatchObject({ type: 'call.invited', callId: secondId });

    // The first call is cancelled meanwhile: its cancel signal waits for the invitation's answer.
    expect((await end(caller, first.callId, 'localHangup')).status).toBe(200);
    await waitUntil('the cancel signal', () => fcmTo(ps.fcm, slow.token, 'call.ended').length >= 1, HOLD_MS + 5000);
    const cancel = fcmTo(ps.fcm, slow.token, 'call.ended')[0]!;
    expect(cancel.receivedAtMs).toBeGreaterThanOrEqual(invitation.receivedAtMs + HOLD_MS);
    expect(callpayloadOf(cancel)).toMatchObject({ type: 'call.ended', callId: first.callId, reason: 'callerCancelled' });
  });
});
