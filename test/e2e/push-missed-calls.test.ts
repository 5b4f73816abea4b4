import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answer, device, end, getCall, uid, type Device } from '../support/fixtures.js';
import { createCall, waitUntil } from './helpers.js';
import { keys } from '../../src/redis/keys.js';
import { registrationField } from '../../src/push/registry.js';
import type { TestServer } from '../support/server.js';
import type { ApnsRecordedRequest } from '../support/apns-server.js';
import { scrapeMetrics } from '../support/exposition.js';
import {
  BUNDLE_ID,
  PREFIX,
  androidToken,
  apnsTo,
  callpayloadOf,
  fcmBody,
  fcmTo,
  iosToken,
  logRecords,
  pushesSettled,
  pushStackForFile,
  registerAndroid,
  registerIos,
  startPushStack,
  ttlSeconds,
  type PushStack,
} from './push-helpers.js';

/**
 * Missed-call alerts (docs/protocol.md "Missed-call alerts") against the fake providers: a member
 * who was rung and never answered on any installation gets one alert per installation, an APNs
 * alert push to its `iosAlert` token and a NORMAL `call.missed` data message to its Android token;
 * nobody else gets one, and a change made again sends none twice.
 */

let ps: PushStack;
let url: string;
/** An api-only server whose calls ring 1.5 s (the first server's worker relays and pushes them). */
let short: TestServer;
/** Every push token and session token of this file: none may be logged. */
const secrets = new Set<string>();

pushStackForFile(
  [1500],
  (s, [shortServer]) => {
    [ps, url, short] = [s, s.url, shortServer!];
  },
  { LOG_LEVEL: 'debug' },
);

const DAY_S = 86_400;

interface IPhone {
  d: Device;
  voip: string;
  alert: string;
}

interface Android {
  d: Device;
  token: string;
}

function inst(baseUrl: string, userId: string, name?: string): Device {
  const d = device(baseUrl, userId, uid('inst'), name);
  secrets.add(d.token);
  return d;
}

async function registerAlert(d: Device, token: string): Promise<void> {
  const res = await d.api.put(`/v1/installations/${encodeURIComponent(d.installationId)}/push-tokens/iosAlert`, { token, appId: BUNDLE_ID, iosEnvironment: 'production' });
  expect(res.status, res.text).toBe(200);
  expect(res.json).toMatchObject({ kind: 'iosAlert', tokenSuffix: token.slice(-6) });
}

/** An iPhone of `userId` with its VoIP token and its regular (alert) token registered. */
async function iPhone(userId: string): Promise<IPhone> {
  const d = inst(url, userId);
  const [voip, alert] = [iosToken(), iosToken()];
  secrets.add(voip).add(alert);
  await registerIos(d, voip);
  await registerAlert(d, alert);
  return { d, voip, alert };
}

async function androidPhone(userId: string): Promise<Android> {
  const d = inst(url, userId);
  const token = androidToken();
  secrets.add(token);
  await registerAndroid(d, token);
  return { d, token };
}

const alertsTo = (p: IPhone): ApnsRecordedRequest[] => apnsTo(ps.apns, p.alert);
const voipTo = (p: IPhone): ApnsRecordedRequest[] => apnsTo(ps.apns, p.voip);
const missedTo = (p: Android) => fcmTo(ps.fcm, p.token, 'call.missed');

async function isRegistered(d: Device, kind: string): Promise<boolean> {
  return (await ps.stack.redis.hexists(keys.pushRegistrations({ prefix: PREFIX, shards: 8 }, d.userId), registrationField(d.installationId, kind))) === 1;
}

/** The ended call as its caller reads it. */
async function endedCall(caller: Device, callId: string): Promise<Record<string, any>> {
  const res = await getCall(caller, callId);
  expect(res.status, res.text).toBe(200);
  expect(res.json.state).toBe('ended');
  return res.json;
}

/** The alert one iPhone got for the call: exactly one, accepted, with Apple's headers and our body. */
function expectOneAlert(p: IPhone, call: Record<string, any>, missedAtMs: number, callerName: string): void {
  const alerts = alertsTo(p);
  expect(alerts).toHaveLength(1);
  const a = alerts[0]!;
  expect(a.status).toBe(200);
  const { authorization, ...headers } = a.headers;
  expect(authorization).toMatch(/^bearer /);
  expect(headers).toEqual({
    'apns-push-type': 'alert',
    'apns-topic': BUNDLE_ID,
    'apns-priority': '10',
    'apns-expiration': String(Math.floor((missedAtMs + DAY_S * 1000) / 1000)),
    'apns-collapse-id': call.callId,
  });
  expect(a.body).toEqual({
    aps: { alert: { 'loc-key': 'MISSED_CALL', 'loc-args': [callerName] }, 'thread-id': call.caller.userId },
    callpayload: {
      schemaVersion: 1,
      type: 'call.missed',
      eventId: `${call.callId}:${call.revision}:missed.${p.d.userId}`,
      callId: call.callId,
      revision: call.revision,
      occurredAtMs: missedAtMs,
      userId: p.d.userId,
      callerUserId: call.caller.userId,
      displayName: callerName,
      handle: call.caller.handle,
      video: false,
    },
  });
}

/** The Android alert: exactly one NORMAL data message with a day's ttl and the callId as collapse key. */
function expectOneAndroidAlert(p: Android, call: Record<string, any>, missedAtMs: number): void {
  const messages = missedTo(p);
  expect(messages).toHaveLength(1);
  const m = messages[0]!;
  expect(m.status).toBe(200);
  const { android } = fcmBody(m).message as { android: Record<string, unknown> };
  expect(android.priority).toBe('NORMAL');
  expect(android.collapse_key).toBe(call.callId);
  // Whole seconds left of the day from the end: at most a day, and not much less.
  expect(ttlSeconds(m)).toBeLessThanOrEqual(DAY_S);
  expect(ttlSeconds(m)).toBeGreaterThan(DAY_S - 60);
  expect(callpayloadOf(m)).toMatchObject({ type: 'call.missed', callId: call.callId, userId: p.d.userId, occurredAtMs: missedAtMs });
}

describe('missed-call alerts, one-to-one', () => {
  it('a call that rang out: one alert to each installation of the callee, none to its VoIP token', async () => {
    const callerName = `Alice ${uid('n').slice(-6)}`;
    const caller = inst(short.url, uid('alice'), callerName);
    const bob = uid('bob');
    const [ios, android] = [await iPhone(bob), await androidPhone(bob)];
    const { callId } = await createCall(caller, bob);
    await waitUntil('the call to ring out', async () => (await getCall(caller, callId)).json.state === 'ended', 10_000);
    const call = await endedCall(caller, callId);
    expect(call.endReason).toBe('unanswered');
    await pushesSettled(ps, [callId]);

    expectOneAlert(ios, call, call.endedAtMs, callerName);
    expectOneAndroidAlert(android, call, call.endedAtMs);
    // The VoIP token rang once (the invitation), and never gets the alert.
    expect(voipTo(ios).map((r) => r.headers['apns-push-type'])).toEqual(['voip']);
    // Why the ring stopped, on every path (docs/devices.md "Report it to CallKit or ConnectionService"):
    // the VoIP push carries the ring deadline, so an iOS app can end its CallKit call without a
    // network; Android's signal carries the end's reason.
    expect((voipTo(ios)[0]!.body as { callpayload: { expiresAtMs: number } }).callpayload.expiresAtMs).toBe(call.expiresAtMs);
    expect(fcmTo(ps.fcm, android.token, 'call.ended').map(callpayloadOf)).toEqual([expect.objectContaining({ callId, reason: 'unanswered' })]);
  });

  it('a call the caller cancelled: the callee gets the alert, the caller nothing; a repeated end sends none again', async () => {
    const caller = inst(url, uid('alice'), 'Alice');
    const callerPhone = await iPhone(caller.userId);
    const bob = uid('bob');
    const ios = await iPhone(bob);
    const { callId } = await createCall(caller, bob);
    await waitUntil('the invitation', () => voipTo(ios).length === 1);
    const operationId = uid('op');
    expect((await end(caller, callId, 'localHangup', operationId)).status).toBe(200);
    // The same end again (a client retry), and another end: neither changes the call again.
    expect((await end(caller, callId, 'localHangup', operationId)).status).toBe(200);
    await end(caller, callId, 'localHangup');
    const call = await endedCall(caller, callId);
    await pushesSettled(ps, [callId]);

    expectOneAlert(ios, call, call.endedAtMs, 'Alice');
    expect(alertsTo(callerPhone)).toEqual([]);
    // The callee's history has the call as missed, and says its alert went out; the caller's record says nothing of it.
    const history = await ios.d.api.get('/v1/calls?missed=true');
    expect(history.status, history.text).toBe(200);
    expect(history.json.calls.find((c: { callId: string }) => c.callId === callId)).toMatchObject({ missed: true, missedCallAlert: true });
    const callers = await caller.api.get('/v1/calls');
    expect(callers.json.calls.find((c: { callId: string }) => c.callId === callId)).not.toHaveProperty('missedCallAlert');
  });

  it('answered on the callee\'s other phone: no alert to any installation', async () => {
    const caller = inst(url, uid('alice'));
    const bob = uid('bob');
    const [ios, android] = [await iPhone(bob), await androidPhone(bob)];
    const { callId } = await createCall(caller, bob);
    await waitUntil('the invitations', () => voipTo(ios).length === 1 && fcmTo(ps.fcm, android.token, 'call.invited').length === 1);
    expect((await answer(android.d, callId)).status).toBe(200);
    expect((await end(caller, callId, 'localHangup')).status).toBe(200);
    await pushesSettled(ps, [callId]);
    expect(alertsTo(ios)).toEqual([]);
    expect(missedTo(android)).toEqual([]);
  });

  it('busy, or declined on another installation: no alert', async () => {
    const caller = inst(url, uid('alice'));
    const bob = uid('bob');
    const [ios, android] = [await iPhone(bob), await androidPhone(bob)];
    const busy = await createCall(caller, bob);
    await waitUntil('the invitation', () => voipTo(ios).length === 1);
    expect((await end(ios.d, busy.callId, 'busy')).status).toBe(200);
    const declined = await createCall(caller, bob);
    await waitUntil('the second invitation', () => voipTo(ios).length === 2);
    expect((await end(android.d, declined.callId, 'declined')).status).toBe(200);
    await pushesSettled(ps, [busy.callId, declined.callId]);
    expect(alertsTo(ios)).toEqual([]);
    expect(missedTo(android)).toEqual([]);
  });

  it('a call the callee\'s call policy screened never rang: no alert', async () => {
    // It rings out for the caller (docs/call-policy.md): on the short ring window.
    const caller = inst(short.url, uid('alice'));
    const bob = uid('bob');
    const [ios, android] = [await iPhone(bob), await androidPhone(bob)];
    expect((await ios.d.api.put('/v1/call-policy', { block: [caller.userId] })).status).toBe(200);
    const { callId } = await createCall(caller, bob);
    await waitUntil('the call to end', async () => (await getCall(caller, callId)).json.state === 'ended', 10_000);
    await pushesSettled(ps, [callId]);
    expect(voipTo(ios)).toEqual([]);
    expect(alertsTo(ios)).toEqual([]);
    expect(fcmTo(ps.fcm, android.token)).toEqual([]);
  });

  it('a call do not disturb silenced never rang, but is a missed call: one alert per installation, no VoIP push, no ring', async () => {
    const caller = inst(short.url, uid('alice'), 'Alice');
    const bob = uid('bob');
    const [ios, android] = [await iPhone(bob), await androidPhone(bob)];
    expect((await ios.d.api.put('/v1/call-policy', { doNotDisturb: { on: true } })).status).toBe(200);
    const { callId } = await createCall(caller, bob);
    await waitUntil('the call to ring out', async () => (await getCall(caller, callId)).json.state === 'ended', 10_000);
    await pushesSettled(ps, [callId]);
    await waitUntil('the alerts', () => alertsTo(ios).length === 1 && missedTo(android).length === 1);
    expect(voipTo(ios)).toEqual([]);
    expect(fcmTo(ps.fcm, android.token).filter((m) => !JSON.stringify(m).includes('call.missed'))).toEqual([]);
    const record = (await ios.d.api.get('/v1/calls?missed=true')).json.calls.find((c: { callId: string }) => c.callId === callId);
    expect(record).toMatchObject({ missed: true, screened: 'silenced' });
  });

  it('BadDeviceToken or Unregistered for the alert token removes only that registration; the VoIP one stays and rings the next call', async () => {
    const caller = inst(url, uid('alice'), 'Alice');
    const bob = uid('bob');
    const [ios, gone] = [await iPhone(bob), await iPhone(bob)];
    ps.apns.setTokenState(ios.alert, 'bad');
    ps.apns.setTokenState(gone.alert, 'unregistered');
    const first = await createCall(caller, bob);
    await waitUntil('the invitations', () => voipTo(ios).length === 1 && voipTo(gone).length === 1);
    expect((await end(caller, first.callId, 'localHangup')).status).toBe(200);
    await waitUntil('the alert tokens to go', async () => !(await isRegistered(ios.d, 'iosAlert')) && !(await isRegistered(gone.d, 'iosAlert')));
    expect(alertsTo(ios).map((r) => [r.status, r.reason])).toEqual([[400, 'BadDeviceToken']]);
    expect(alertsTo(gone).map((r) => [r.status, r.reason])).toEqual([[410, 'Unregistered']]);
    expect(await isRegistered(ios.d, 'iosVoip')).toBe(true);
    expect(await isRegistered(gone.d, 'iosVoip')).toBe(true);
    // No alert went out for that call: its record says so.
    const history = await ios.d.api.get('/v1/calls?missed=true');
    expect(history.json.calls.find((c: { callId: string }) => c.callId === first.callId)).toMatchObject({ missed: true, missedCallAlert: false });

    const second = await createCall(caller, bob);
    await waitUntil('the second invitation', () => voipTo(ios).length === 2);
    expect(voipTo(ios)[1]!.status).toBe(200);
    expect((await end(caller, second.callId, 'localHangup')).status).toBe(200);
    await pushesSettled(ps, [first.callId, second.callId]);
    // Nothing more to the removed alert tokens.
    expect(alertsTo(ios)).toHaveLength(1);
    expect(alertsTo(gone)).toHaveLength(1);
  });
});

describe('missed-call alerts, group calls', () => {
  it('a member who never answered gets the alert; one who joined, declined or was busy gets none', async () => {
    const caller = inst(url, uid('alice'), 'Alice');
    const [bob, carol, dave, erin] = [uid('bob'), uid('carol'), uid('dave'), uid('erin')];
    const [bobIos, carolIos, carolAndroid, daveIos, erinIos] = [await iPhone(bob), await iPhone(carol), await androidPhone(carol), await iPhone(dave), await iPhone(erin)];
    const callId = randomUUID();
    const created = await caller.api.post('/v1/calls', { callId, calleeUserIds: [bob, carol, dave, erin], title: 'Standup', operationId: uid('op') });
    expect(created.status, created.text).toBe(201);
    await waitUntil('every invitation', () => [bobIos, carolIos, daveIos, erinIos].every((p) => voipTo(p).length === 1));
    expect((await answer(bobIos.d, callId)).status).toBe(200);
    expect((await end(daveIos.d, callId, 'declined')).status).toBe(200);
    expect((await end(erinIos.d, callId, 'busy')).status).toBe(200);
    const ended = await caller.api.post(`/v1/calls/${callId}/end`, { operationId: uid('op'), reason: 'localHangup', forAll: true });
    expect(ended.status, ended.text).toBe(200);
    const call = await endedCall(caller, callId);
    await pushesSettled(ps, [callId]);

    // Carol was still ringing at the end: she missed it, on both her phones; the group's title is the name shown.
    expectOneAlert(carolIos, call, call.endedAtMs, 'Standup');
    expectOneAndroidAlert(carolAndroid, call, call.endedAtMs);
    for (const p of [bobIos, daveIos, erinIos]) expect(alertsTo(p)).toEqual([]);
  });
});

describe('missed-call alerts, a group member ringing out while the call goes on', () => {
  it('is alerted at its own ring-out, once, though the call ends later', async () => {
    // Created on the short ring window: each member rings 1.5 s.
    const caller = inst(short.url, uid('alice'), 'Alice');
    const [bob, carol] = [uid('bob'), uid('carol')];
    const [bobIos, carolIos] = [await iPhone(bob), await iPhone(carol)];
    const callId = randomUUID();
    const created = await caller.api.post('/v1/calls', { callId, calleeUserIds: [bob, carol], operationId: uid('op') });
    expect(created.status, created.text).toBe(201);
    await waitUntil('the invitations', () => voipTo(bobIos).length === 1 && voipTo(carolIos).length === 1);
    expect((await answer(bobIos.d, callId)).status).toBe(200);
    // Carol rings out while Bob and Alice talk: her alert comes with that change.
    await waitUntil('carol\'s alert', () => alertsTo(carolIos).length === 1, 10_000);
    expect((await getCall(caller, callId)).json.state).toBe('accepted');
    const ended = await caller.api.post(`/v1/calls/${callId}/end`, { operationId: uid('op'), reason: 'localHangup', forAll: true });
    expect(ended.status, ended.text).toBe(200);
    await pushesSettled(ps, [callId]);
    expect(alertsTo(carolIos)).toHaveLength(1);
    expect(alertsTo(carolIos)[0]).toMatchObject({ status: 200, headers: { 'apns-collapse-id': callId } });
    expect((alertsTo(carolIos)[0]!.body as { callpayload: Record<string, unknown> }).callpayload).toMatchObject({ type: 'call.missed', callId, userId: carol });
    expect(alertsTo(bobIos)).toEqual([]);
  });
});

describe('missed-call alerts as the deployment sets them', () => {
  /** A deployment with Android alerts off, an hour's lifetime and its own loc-key (docs/push-apps.md "Missed-call alerts"). */
  let own: PushStack;
  beforeAll(async () => {
    own = await startPushStack({ MISSED_CALL_ALERTS: 'ios', MISSED_CALL_ALERT_LIFETIME_S: '3600', MISSED_CALL_ALERT_LOC_KEY: 'CALL_MISSED_FROM' });
  });
  afterAll(async () => {
    await own?.stop();
  });

  it('Android off: only the iPhone is alerted, with the lifetime and loc-key set', async () => {
    const caller = inst(own.url, uid('alice'), 'Alice');
    const bob = uid('bob');
    const iphone = inst(own.url, bob);
    const [voip, alert] = [iosToken(), iosToken()];
    await registerIos(iphone, voip);
    await registerAlert(iphone, alert);
    const android = inst(own.url, bob);
    const token = androidToken();
    await registerAndroid(android, token);
    const { callId } = await createCall(caller, bob);
    await waitUntil('the invitations', () => apnsTo(own.apns, voip).length === 1 && fcmTo(own.fcm, token, 'call.invited').length === 1);
    expect((await end(caller, callId, 'localHangup')).status).toBe(200);
    const call = await endedCall(caller, callId);
    await pushesSettled(own, [callId]);

    const alerts = apnsTo(own.apns, alert);
    expect(alerts).toHaveLength(1);
    expect(alerts[0]!.headers['apns-expiration']).toBe(String(Math.floor((call.endedAtMs + 3_600_000) / 1000)));
    expect((alerts[0]!.body as { aps: { alert: Record<string, unknown> } }).aps.alert).toEqual({ 'loc-key': 'CALL_MISSED_FROM', 'loc-args': ['Alice'] });
    // The Android phone still gets its stop-ringing signal, and no alert.
    expect(fcmTo(own.fcm, token).map((m) => callpayloadOf(m).type)).toEqual(['call.invited', 'call.ended']);
  });
});

describe('metrics', () => {
  it('counts the alerts by platform and result', async () => {
    const e = await scrapeMetrics(ps.stack.servers[0]!.metricsUrl);
    const sample = (platform: string, result: string) =>
      e.samples.find((x) => x.name === 'calling_missed_call_pushes_total' && x.labels.platform === platform && x.labels.result === result)?.value ?? 0;
    // Every test above ran before this one (one file, in order): the alerts they checked, and two invalid iOS tokens.
    expect(sample('ios', 'accepted')).toBe(5);
    expect(sample('android', 'accepted')).toBe(3);
    expect(sample('ios', 'invalid-token')).toBe(2);
  });
});

describe('logs', () => {
  it('no push token, session token or alert payload in any log line', async () => {
    const all = ps.stack.servers.map((s) => s.logs()).join('\n') + short.logs();
    expect(logRecords(all).length).toBeGreaterThan(0);
    for (const secret of secrets) expect(all).not.toContain(secret);
    expect(all).not.toContain('MISSED_CALL');
    expect(all).not.toContain('loc-args');
  });
});
