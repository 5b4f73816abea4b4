import { describe, expect, it } from 'vitest';
import type { TestServer } from '../support/server.js';
import { end, getCall, uid } from '../support/fixtures.js';
import { createCall, waitUntil } from './helpers.js';
import { withoutAlerts,
  apnsTo,
  callpayloadOf,
  fcmTo,
  pushesSettled,
  type PushStack,
  installation,
  phone,
  invitesTo as invitesToFake,
  pushStackForFile,
} from './push-helpers.js';

/**
 * Push retries (docs/protocol.md "What is not sent, retries and invalid tokens"): a transient refusal is retried, but never for a call that
 * stopped ringing or expired meanwhile; provider credentials rejected as expired are renewed once.
 * (Invalid tokens and the logs: push-invalid-tokens.test.ts.)
 */

let ps: PushStack;
let url: string;
/** An api-only process on the same Redis whose calls ring for 3 s. */
let short: TestServer;

pushStackForFile([3000], (s, [a]) => {
  [ps, url, short] = [s, s.url, a!];
});

const iPhone = (userId: string) => phone(url, userId, 'iosVoip');
const androidPhone = (userId: string) => phone(url, userId, 'androidPush');
const invitesTo = (token: string) => invitesToFake(ps.fcm, token);

describe('no invitation for a call that stopped ringing', () => {
  it('503 + retry-after 2 on the first attempt, then the caller cancels: no further invitation on either platform', async () => {
    const caller = installation(url, uid('caller'));
    const calleeUserId = uid('callee');
    const [ios, android] = [await iPhone(calleeUserId), await androidPhone(calleeUserId)];
    ps.apns.failNext(ios.token, { status: 503, retryAfterSeconds: 2 });
    ps.fcm.failNext(android.token, { status: 503, retryAfterSeconds: 2 });

    const call = await createCall(caller, calleeUserId);
    await waitUntil('the first attempts', () => apnsTo(ps.apns, ios.token).length >= 1 && invitesTo(android.token).length >= 1);
    const cancelled = await end(caller, call.callId, 'localHangup');
    expect(cancelled.status, cancelled.text).toBe(200);

    // The retries were due 2 s after the first attempts: wait until no retry is pending.
    await pushesSettled(ps, [call.callId]);
    expect(apnsTo(ps.apns, ios.token).map((r) => r.status)).toEqual([503]);
    expect(invitesTo(android.token).map((m) => m.status)).toEqual([503]);
    // What the Android installation does get is the cancel signal.
    expect(withoutAlerts(fcmTo(ps.fcm, android.token)).map((m) => callpayloadOf(m).type)).toEqual(['call.invited', 'call.ended']);
  });

  it('503 + retry-after 4 on a call ringing 3 s: the call expires before the retry and nothing more is sent', async () => {
    const caller = installation(short.url, uid('caller'));
    const calleeUserId = uid('callee');
    const [ios, android] = [await iPhone(calleeUserId), await androidPhone(calleeUserId)];
    ps.apns.failNext(ios.token, { status: 503, retryAfterSeconds: 4 });
    ps.fcm.failNext(android.token, { status: 503, retryAfterSeconds: 4 });

    const call = await createCall(caller, calleeUserId);
    expect(call.snapshot.expiresAtMs - call.snapshot.createdAtMs).toBe(3000);
    await waitUntil('the first attempts', () => apnsTo(ps.apns, ios.token).length >= 1 && invitesTo(android.token).length >= 1);
    // No retry pending (one due after the expiry is given up, or skipped when it runs).
    await pushesSettled(ps, [call.callId]);
    expect(apnsTo(ps.apns, ios.token).map((r) => r.status)).toEqual([503]);
    expect(invitesTo(android.token).map((m) => m.status)).toEqual([503]);
    // The call expires: the ring timer ends it.
    await waitUntil('the call to end', async () => (await getCall(caller, call.callId)).json.state === 'ended');
    const snap = await getCall(caller, call.callId);
    expect(snap.json).toMatchObject({ state: 'ended', endReason: 'unanswered' });
  });
});

describe('transient refusals', () => {
  it('429 then 200: each platform delivers the invitation exactly once, on the retry', async () => {
    const caller = installation(url, uid('caller'));
    const calleeUserId = uid('callee');
    const [ios, android] = [await iPhone(calleeUserId), await androidPhone(calleeUserId)];
    ps.apns.failNext(ios.token, { status: 429 });
    ps.fcm.failNext(android.token, { status: 429 });

    const call = await createCall(caller, calleeUserId);
    await waitUntil('the retries', () => apnsTo(ps.apns, ios.token).length >= 2 && invitesTo(android.token).length >= 2);
    await pushesSettled(ps, [call.callId]);

    const iosReqs = apnsTo(ps.apns, ios.token);
    expect(iosReqs.map((r) => [r.status, r.reason ?? null])).toEqual([
      [429, 'TooManyRequests'],
      [200, null],
    ]);
    const androidReqs = invitesTo(android.token);
    expect(androidReqs.map((m) => m.status)).toEqual([429, 200]);
    for (const payload of [...iosReqs.map((r) => (r.body as { callpayload: Record<string, any> }).callpayload), ...androidReqs.map(callpayloadOf)]) {
      expect(payload).toMatchObject({ type: 'call.invited', callId: call.callId, revision: call.snapshot.revision });
    }
    // Same invitation, same eventId: a device that somehow got both rings once.
    expect(new Set(androidReqs.map((m) => callpayloadOf(m).eventId)).size).toBe(1);
  });

  it('403 ExpiredProviderToken: the push is retried once under a newly signed JWT (exactly 2 requests), and later pushes keep that JWT', async () => {
    const caller = installation(url, uid('caller'));
    const calleeUserId = uid('callee');
    const ios = await iPhone(calleeUserId);
    ps.apns.failNext(ios.token, { status: 403, reason: 'ExpiredProviderToken' });

    const call = await createCall(caller, calleeUserId);
    await waitUntil('the retry', () => apnsTo(ps.apns, ios.token).length >= 2);
    await pushesSettled(ps, [call.callId]);
    const reqs = apnsTo(ps.apns, ios.token);
    expect(reqs.map((r) => [r.status, r.reason ?? null])).toEqual([
      [403, 'ExpiredProviderToken'],
      [200, null],
    ]);
    const [rejected, fresh] = reqs.map((r) => r.headers.authorization);
    expect(fresh).not.toBe(rejected);
    expect(reqs[1]!.jwt?.payload.iat).toBeGreaterThanOrEqual(reqs[0]!.jwt!.payload.iat!);

    const other = await iPhone(uid('callee'));
    await createCall(caller, other.d.userId);
    await waitUntil('the next push', () => apnsTo(ps.apns, other.token).length >= 1);
    expect(apnsTo(ps.apns, other.token)[0]!.headers.authorization).toBe(fresh);
  });

  it('an expired FCM access token (401): one new token exchange, the message sent again once under it', async () => {
    const caller = installation(url, uid('caller'));
    const android = await androidPhone(uid('callee'));
    const exchangesBefore = ps.fcm.tokenRequests.length;
    ps.fcm.expireAllAccessTokens();

    const call = await createCall(caller, android.d.userId);
    await waitUntil('the retry', () => invitesTo(android.token).length >= 2);
    await pushesSettled(ps, [call.callId]);
    const msgs = invitesTo(android.token);
    expect(msgs.map((m) => m.status)).toEqual([401, 200]);
    expect(msgs[1]!.accessToken).not.toBe(msgs[0]!.accessToken);
    expect(ps.fcm.tokenRequests.slice(exchangesBefore).map((t) => t.status)).toEqual([200]);
  });
});
