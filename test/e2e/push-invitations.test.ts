import { describe, expect, it } from 'vitest';
import type { TestServer } from '../support/server.js';
import { eventsUntil, headCursor, uid } from '../support/fixtures.js';
import { createCall, waitUntil } from './helpers.js';
import { sleep } from '../support/wait.js';
import {
  BUNDLE_ID,
  androidToken,
  apnsTo,
  callpayloadOf,
  fcmBody,
  fcmTo,
  iosToken,
  logRecords,
  registerAndroid,
  registerIos,
  pushesSettled,
  ttlSeconds,
  type PushStack,
  installation,
  pushStackForFile,
} from './push-helpers.js';

/**
 * Push invitations end to end (docs/protocol.md "Push formats", "Limits"): a real server process configured by
 * environment only, real BullMQ workers on a real Redis, and local fake APNs / FCM that check what
 * the real providers check. What is asserted is what reached the providers.
 */

let ps: PushStack;
let url: string;
/** An api-only process on the same Redis whose calls ring for 3 s (the first server's workers send their pushes). */
let short: TestServer;
/** Same, with the shortest allowed ring window: 1 s. */
let shortest: TestServer;

pushStackForFile([3000, 1000], (s, [a, b]) => {
  [ps, url, short, shortest] = [s, s.url, a!, b!];
});

const JWT_SHAPE = /^bearer [A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

describe('invitation requests, exactly', () => {
  it('iOS: POST /3/device/<token> with the VoIP headers and {"aps":{},"callpayload":<invitation>}; Android: a HIGH data message with the same invitation as a JSON string', async () => {
    const displayName = 'Alice Example';
    const caller = installation(url, uid('caller'), displayName);
    const calleeUserId = uid('callee');
    const iphone = installation(url, calleeUserId);
    const android = installation(url, calleeUserId);
    const [iosTok, androidTok] = [iosToken(), androidToken()];
    await registerIos(iphone, iosTok, 'production');
    await registerAndroid(android, androidTok);
    const cursor = await headCursor(android);

    const call = await createCall(caller, calleeUserId, { video: true });
    const s = call.snapshot;
    await waitUntil('both invitations', () => apnsTo(ps.apns, iosTok).length >= 1 && fcmTo(ps.fcm, androidTok).length >= 1);
    await pushesSettled(ps, [call.callId]);
    const ios = apnsTo(ps.apns, iosTok);
    const fcm = fcmTo(ps.fcm, androidTok);
    expect(ios).toHaveLength(1);
    expect(fcm).toHaveLength(1);
    expect(apnsTo(ps.apnsSandbox, iosTok)).toHaveLength(0);

    // The invitation the callee's devices see over signaling carries the same eventId, so a
    // device that gets both deduplicates them.
    const [logged] = await eventsUntil(android, cursor, (e) => e.length >= 1);
    expect(logged.type).toBe('call.invited');
    const invitation = {
      schemaVersion: 1,
      type: 'call.invited',
      callId: call.callId,
      displayName,
      handle: `app:${caller.userId}`,
      eventId: logged.eventId,
      revision: s.revision,
      issuedAtMs: expect.any(Number),
      expiresAtMs: s.expiresAtMs,
      video: true,
    };
    expect(s.caller.handle).toBe(invitation.handle);

    // --- iOS (docs/protocol.md "iOS VoIP invitation")
    const r = ios[0]!;
    expect(r.status, r.reason).toBe(200);
    expect(r.method).toBe('POST');
    expect(r.path).toBe(`/3/device/${iosTok}`);
    expect(r.headers.authorization).toMatch(JWT_SHAPE);
    expect(r.jwt?.header).toEqual({ alg: 'ES256', kid: ps.key.keyId });
    expect(r.jwt?.payload).toEqual({ iss: ps.key.teamId, iat: expect.any(Number) });
    expect(r.headers['apns-push-type']).toBe('voip');
    expect(r.headers['apns-topic']).toBe(`${BUNDLE_ID}.voip`);
    expect(r.headers['apns-priority']).toBe('10');
    expect(r.headers['apns-expiration']).toBe('0');
    expect(Object.keys(r.headers).filter((h) => h.startsWith('ios-'))).toEqual([]);
    expect(r.body).toEqual({ aps: {}, callpayload: invitation });
    const iosIssued = (r.body as { callpayload: { issuedAtMs: number } }).callpayload.issuedAtMs;
    expect(Number.isSafeInteger(iosIssued)).toBe(true);
    expect(iosIssued).toBeGreaterThanOrEqual(s.createdAtMs);
    expect(iosIssued).toBeLessThanOrEqual(r.receivedAtMs);

    // --- Android (docs/protocol.md "Android invitation")
    const m = fcm[0]!;
    expect(m.status, JSON.stringify(m.response)).toBe(200);
    expect(m.method).toBe('POST');
    expect(m.path).toBe(`/v1/projects/${ps.fcm.projectId}/messages:send`);
    expect(m.headers.authorization).toBe(`Bearer ${m.accessToken}`);
    expect(m.headers['content-type']).toBe('application/json');
    expect(m.body).toEqual({
      message: {
        token: androidTok,
        android: { priority: 'HIGH', ttl: expect.stringMatching(/^\d+s$/) },
        data: { callpayload: expect.any(String) },
      },
    });
    expect(JSON.stringify(m.body)).not.toContain('notification');
    const payload = callpayloadOf(m);
    expect(payload).toEqual(invitation);
    expect(payload.issuedAtMs).toBeGreaterThanOrEqual(s.createdAtMs);
    expect(payload.issuedAtMs).toBeLessThanOrEqual(m.receivedAtMs);

    // ttl: whole seconds left until expiresAtMs when sent (between issuedAtMs and arrival).
    const ttl = ttlSeconds(m);
    expect(s.expiresAtMs - s.createdAtMs).toBe(45_000);
    expect([44, 45]).toContain(ttl);
    expect(ttl).toBeGreaterThanOrEqual(Math.floor((s.expiresAtMs - m.receivedAtMs) / 1000));
    expect(ttl).toBeLessThanOrEqual(Math.floor((s.expiresAtMs - payload.issuedAtMs) / 1000));
  });

  it('a voice call (video false) is sent as such to both platforms', async () => {
    const caller = installation(url, uid('caller'));
    const calleeUserId = uid('callee');
    const [iosTok, androidTok] = [iosToken(), androidToken()];
    await registerIos(installation(url, calleeUserId), iosTok);
    await registerAndroid(installation(url, calleeUserId), androidTok);
    const call = await createCall(caller, calleeUserId);
    await waitUntil('both invitations', () => apnsTo(ps.apns, iosTok).length >= 1 && fcmTo(ps.fcm, androidTok).length >= 1);
    const apnsBody = apnsTo(ps.apns, iosTok)[0]!.body as { callpayload: Record<string, unknown> };
    expect(apnsBody.callpayload.video).toBe(false);
    expect(apnsBody.callpayload.callId).toBe(call.callId);
    expect(callpayloadOf(fcmTo(ps.fcm, androidTok)[0]!).video).toBe(false);
  });
});

describe('sandbox and production', () => {
  it('each iOS token goes to the origin of its registered iosEnvironment, and follows a re-registration', async () => {
    const caller = installation(url, uid('caller'));
    const calleeUserId = uid('callee');
    const releasePhone = installation(url, calleeUserId);
    const devPhone = installation(url, calleeUserId);
    const [releaseTok, devTok] = [iosToken(), iosToken()];
    await registerIos(releasePhone, releaseTok, 'production');
    await registerIos(devPhone, devTok, 'development');

    const first = await createCall(caller, calleeUserId);
    await waitUntil('both VoIP pushes', () => apnsTo(ps.apns, releaseTok).length >= 1 && apnsTo(ps.apnsSandbox, devTok).length >= 1);
    await pushesSettled(ps, [first.callId]);
    expect(apnsTo(ps.apns, releaseTok).map((r) => r.status)).toEqual([200]);
    expect(apnsTo(ps.apnsSandbox, devTok).map((r) => r.status)).toEqual([200]);
    expect(apnsTo(ps.apns, devTok)).toHaveLength(0);
    expect(apnsTo(ps.apnsSandbox, releaseTok)).toHaveLength(0);
    for (const r of [apnsTo(ps.apns, releaseTok)[0]!, apnsTo(ps.apnsSandbox, devTok)[0]!]) {
      expect((r.body as { callpayload: { callId: string } }).callpayload.callId).toBe(first.callId);
    }

    // The release phone now runs a development build: its next invitation goes to the sandbox.
    await registerIos(releasePhone, releaseTok, 'development');
    const second = await createCall(caller, calleeUserId);
    await waitUntil('the sandbox pushes of the second call', () => apnsTo(ps.apnsSandbox, releaseTok).length >= 1 && apnsTo(ps.apnsSandbox, devTok).length >= 2);
    await pushesSettled(ps, [first.callId, second.callId]);
    expect(apnsTo(ps.apns, releaseTok)).toHaveLength(1);
    expect(apnsTo(ps.apns, devTok)).toHaveLength(0);
    const moved = apnsTo(ps.apnsSandbox, releaseTok);
    expect(moved.map((r) => r.status)).toEqual([200]);
    expect((moved[0]!.body as { callpayload: { callId: string } }).callpayload.callId).toBe(second.callId);
  });
});

describe('provider credentials are reused', () => {
  it('ten calls: ten VoIP pushes under one provider JWT and ten Android messages under one access token', async () => {
    const callees = Array.from({ length: 10 }, () => {
      const userId = uid('callee');
      return { ios: installation(url, userId), android: installation(url, userId), iosTok: iosToken(), androidTok: androidToken() };
    });
    await Promise.all(callees.flatMap((c) => [registerIos(c.ios, c.iosTok), registerAndroid(c.android, c.androidTok)]));
    const caller = installation(url, uid('caller'));
    const calls = await Promise.all(callees.map((c) => createCall(caller, c.ios.userId)));

    await waitUntil(
      'twenty invitations',
      () => callees.every((c) => apnsTo(ps.apns, c.iosTok).length >= 1 && fcmTo(ps.fcm, c.androidTok).length >= 1),
      10_000,
    );
    await pushesSettled(ps, calls.map((c) => c.callId));
    const ios = callees.flatMap((c) => apnsTo(ps.apns, c.iosTok));
    const android = callees.flatMap((c) => fcmTo(ps.fcm, c.androidTok));
    expect(ios).toHaveLength(10);
    expect(android).toHaveLength(10);
    expect(ios.every((r) => r.status === 200)).toBe(true);
    expect(android.every((m) => m.status === 200)).toBe(true);
    expect(new Set(ios.map((r) => (r.body as { callpayload: { callId: string } }).callpayload.callId))).toEqual(new Set(calls.map((c) => c.callId)));

    expect(new Set(ios.map((r) => r.headers.authorization)).size).toBe(1);
    expect(new Set(android.map((m) => m.accessToken)).size).toBe(1);
    // Nothing in this file makes a credential stale: one JWT and one token exchange for the
    // whole server life, shared by the production and sandbox origins.
    const allJwts = new Set([...ps.apns.requests, ...ps.apnsSandbox.requests].map((r) => r.headers.authorization));
    expect(allJwts.size).toBe(1);
    expect(ps.fcm.tokenRequests.filter((t) => t.status === 200)).toHaveLength(1);
  });
});

describe('ttl and the last second', () => {
  it('with a 3 s ring and a provider answering 503 + retry-after 1: ttl counts down "2s" then "1s", never "0s", and nothing is sent in the last second', async () => {
    const caller = installation(short.url, uid('caller'));
    const calleeUserId = uid('callee');
    const [iosTok, androidTok] = [iosToken(), androidToken()];
    await registerIos(installation(url, calleeUserId), iosTok);
    await registerAndroid(installation(url, calleeUserId), androidTok);
    for (let i = 0; i < 6; i++) {
      ps.apns.failNext(iosTok, { status: 503, retryAfterSeconds: 1 });
      ps.fcm.failNext(androidTok, { status: 503, retryAfterSeconds: 1 });
    }

    const call = await createCall(caller, calleeUserId);
    const { expiresAtMs, createdAtMs } = call.snapshot as { expiresAtMs: number; createdAtMs: number };
    expect(expiresAtMs - createdAtMs).toBe(3000);
    // Every attempt that was going to happen has happened: no retry is pending any more.
    await pushesSettled(ps, [call.callId]);

    const ios = apnsTo(ps.apns, iosTok);
    const invites = fcmTo(ps.fcm, androidTok, 'call.invited');
    expect(ios.length, 'the retry after the first 503 was sent').toBeGreaterThanOrEqual(2);
    expect(invites.length, 'the retry after the first 503 was sent').toBeGreaterThanOrEqual(2);
    // Send time ≤ arrival; 100 ms of slack for the way from the worker to the fake.
    const lastSecond = expiresAtMs - 1000 + 100;
    for (const r of ios) {
      expect(r.status).toBe(503);
      // issuedAtMs is the worker's clock when it decided to send: at least a second left then.
      const issuedAtMs = (r.body as { callpayload: { issuedAtMs: number } }).callpayload.issuedAtMs;
      expect(expiresAtMs - issuedAtMs, 'a VoIP push was sent with under a second left').toBeGreaterThanOrEqual(1000);
      expect(r.receivedAtMs, 'no VoIP push in the last second of the ring window').toBeLessThan(lastSecond);
    }
    const ttls: number[] = [];
    for (const m of invites) {
      expect(m.status).toBe(503);
      expect(m.receivedAtMs, 'no Android invitation in the last second of the ring window').toBeLessThan(lastSecond);
      expect(fcmBody(m).message.android.priority).toBe('HIGH');
      const ttl = ttlSeconds(m);
      const issuedAtMs = callpayloadOf(m).issuedAtMs as number;
      expect(expiresAtMs - issuedAtMs, 'an Android invitation was sent with under a second left').toBeGreaterThanOrEqual(1000);
      expect(ttl).toBeGreaterThanOrEqual(Math.max(1, Math.floor((expiresAtMs - m.receivedAtMs) / 1000)));
      expect(ttl).toBeLessThanOrEqual(Math.floor((expiresAtMs - issuedAtMs) / 1000));
      ttls.push(ttl);
    }
    expect(ttls[0]).toBe(2);
    expect(ttls).toContain(1);
    expect(ttls.every((t) => t >= 1)).toBe(true);
  });

  it('a call with under a second left by the time a worker takes its invitation is not pushed at all (1 s ring)', async () => {
    const caller = installation(shortest.url, uid('caller'));
    const calleeUserId = uid('callee');
    const [iosTok, androidTok] = [iosToken(), androidToken()];
    const android = installation(url, calleeUserId);
    await registerIos(installation(url, calleeUserId), iosTok);
    await registerAndroid(android, androidTok);
    const cursor = await headCursor(android);

    // The worker (in the first server) is paused while the call is created, so by the time it takes
    // the invitation less than the whole 1 s is left, whatever the machine's speed: a relay that
    // picked it up in the same millisecond would see exactly 1000 ms left, which is pushed.
    const worker = ps.stack.servers[0]!.child;
    worker.kill('SIGSTOP');
    let call: Awaited<ReturnType<typeof createCall>>;
    try {
      call = await createCall(caller, calleeUserId);
      await sleep(20);
    } finally {
      worker.kill('SIGCONT');
    }
    expect(call.snapshot.expiresAtMs - call.snapshot.createdAtMs).toBe(1000);
    // The call still rings over signaling, and ends as unanswered at its expiry.
    const events = await eventsUntil(android, cursor, (e) => e.some((x) => x.type === 'call.ended'), 5000);
    expect(events.map((e) => e.type)).toEqual(['call.invited', 'call.ended']);
    await pushesSettled(ps, [call.callId]);
    expect(apnsTo(ps.apns, iosTok)).toHaveLength(0);
    expect(fcmTo(ps.fcm, androidTok, 'call.invited')).toHaveLength(0);
  });
});

describe('configured push', () => {
  it('a server with both providers configured does not warn that push is unconfigured', () => {
    const warnings = logRecords(ps.stack.servers[0]!.logs()).filter((r) => /push is not configured/.test(String(r.msg)));
    expect(warnings).toEqual([]);
  });

  it("the worker's metrics time each provider round trip by provider and result", async () => {
    const metricsUrl = ps.stack.servers[0]!.metricsUrl;
    const accepted = async (provider: string) => {
      const text = await (await fetch(`${metricsUrl}/metrics`)).text();
      const m = new RegExp(`^calling_push_request_duration_seconds_count\\{provider="${provider}",result="accepted"\\} (\\d+)$`, 'm').exec(text);
      return Number(m?.[1] ?? 0);
    };
    const before = [await accepted('apns'), await accepted('fcm')];
    const calleeUserId = uid('callee');
    const [iosTok, androidTok] = [iosToken(), androidToken()];
    await registerIos(installation(url, calleeUserId), iosTok);
    await registerAndroid(installation(url, calleeUserId), androidTok);
    await createCall(installation(url, uid('caller')), calleeUserId);
    await waitUntil('both invitations', () => apnsTo(ps.apns, iosTok).length >= 1 && fcmTo(ps.fcm, androidTok).length >= 1);
    await waitUntil('both round trips timed', async () => (await accepted('apns')) > before[0]! && (await accepted('fcm')) > before[1]!);
  });
});
