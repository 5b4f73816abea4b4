import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { answer, device, end, getCall, uid, type Device } from '../support/fixtures.js';
import { connect, type SignalingClient } from '../support/ws-client.js';
import { createCall } from './helpers.js';
import { keys } from '../../src/redis/keys.js';
import type { TestServer } from '../support/server.js';
import { scrapeMetrics } from '../support/exposition.js';
import { BUNDLE_ID, PREFIX, androidToken, apnsTo, fcmTo, iosToken, logRecords, pushesSettled, pushStackForFile, registerAndroid, registerIos, type PushStack } from './push-helpers.js';

/**
 * Missed-call alerts and the devices that know (docs/protocol.md "Missed-call alerts"): an
 * installation that sent a ringing receipt and then got the end that made its user miss the call
 * on its socket gets no alert; the user's other installations still do, and so does one that rang
 * but whose socket closed before the end, or one whose socket got the end but that never rang.
 * Against the fake providers, with the default grace (MISSED_CALL_ALERT_GRACE_MS): the barrier
 * (pushesSettled) waits for the graced alerts' jobs.
 */

let ps: PushStack;
let url: string;
/** An api-only server whose calls ring 1.5 s (the first server's worker relays and pushes them). */
let short: TestServer;
const secrets = new Set<string>();
const ks = { prefix: PREFIX, shards: 8 };

pushStackForFile([1500], (s, [shortServer]) => {
  [ps, url, short] = [s, s.url, shortServer!];
});

interface Phone {
  d: Device;
  /** Where its alert goes: the iosAlert token of an iPhone, the FCM token of an Android phone. */
  alertToken: string;
  platform: 'ios' | 'android';
  ws?: SignalingClient;
}

function inst(baseUrl: string, userId: string, name?: string): Device {
  const d = device(baseUrl, userId, uid('inst'), name);
  secrets.add(d.token);
  return d;
}

/** An iPhone of `userId` with its VoIP and its alert token. */
async function iPhone(userId: string): Promise<Phone> {
  const d = inst(url, userId);
  const [voip, alert] = [iosToken(), iosToken()];
  secrets.add(voip).add(alert);
  await registerIos(d, voip);
  const res = await d.api.put(`/v1/installations/${encodeURIComponent(d.installationId)}/push-tokens/iosAlert`, { token: alert, appId: BUNDLE_ID, iosEnvironment: 'production' });
  expect(res.status, res.text).toBe(200);
  return { d, alertToken: alert, platform: 'ios' };
}

async function androidPhone(userId: string): Promise<Phone> {
  const d = inst(url, userId);
  const token = androidToken();
  secrets.add(token);
  await registerAndroid(d, token);
  return { d, alertToken: token, platform: 'android' };
}

/** The missed-call alerts a phone got (every attempt). */
const alertsTo = (p: Phone): unknown[] => (p.platform === 'ios' ? apnsTo(ps.apns, p.alertToken) : fcmTo(ps.fcm, p.alertToken, 'call.missed'));

/** The phone's socket, open and synced, on the first server (a gateway). */
async function online(p: Phone): Promise<SignalingClient> {
  p.ws = await connect(url, p.d.token, { name: p.d.installationId });
  return p.ws;
}

/** Waits for the call's invitation on the phone's socket, then sends its ringing receipt as a frame. */
async function rings(p: Phone, callId: string): Promise<void> {
  await p.ws!.until(() => p.ws!.events().some((e) => e.callId === callId && e.type === 'call.invited'), 5000, 'the invitation');
  const reply = await p.ws!.command({ type: 'ringing', callId, operationId: uid('op'), via: 'socket' });
  expect(reply.status, JSON.stringify(reply)).toBe(200);
}

/** Waits for the call's end on the phone's socket, and returns its reason. */
async function endOnSocket(p: Phone, callId: string, timeoutMs = 5000): Promise<string> {
  await p.ws!.until(() => p.ws!.events().some((e) => e.callId === callId && e.type === 'call.ended'), timeoutMs, 'the end');
  return String(p.ws!.events().find((e) => e.callId === callId && e.type === 'call.ended')!.reason);
}

async function closeSocket(p: Phone): Promise<void> {
  p.ws!.ws.close();
  await p.ws!.closed;
  p.ws = undefined;
}

const rangMark = (p: Phone, callId: string) => ps.stack.redis.get(keys.missedCallRang(ks, p.d.userId, callId, p.d.installationId));
const endSeenMark = (p: Phone, callId: string) => ps.stack.redis.get(keys.missedCallEndSeen(ks, p.d.userId, callId, p.d.installationId));

/** The callee's history record of the call. */
async function missedRecord(d: Device, callId: string): Promise<Record<string, unknown>> {
  const res = await d.api.get('/v1/calls?missed=true');
  expect(res.status, res.text).toBe(200);
  return res.json.calls.find((c: { callId: string }) => c.callId === callId);
}

/** Alerts skipped as seen in this file, by platform: the metrics test checks the count. */
const skipped = { ios: 0, android: 0 };

describe('an installation that rang and saw the end on its socket', () => {
  it('gets no alert when the caller cancels; the same user\'s installation without a socket gets one', async () => {
    const caller = inst(url, uid('alice'), 'Alice');
    const bob = uid('bob');
    const [seen, away] = [await iPhone(bob), await androidPhone(bob)];
    await online(seen);
    const { callId } = await createCall(caller, bob);
    await rings(seen, callId);
    expect(await rangMark(seen, callId)).toBe('1');
    expect((await end(caller, callId, 'localHangup')).status).toBe(200);
    expect(await endOnSocket(seen, callId)).toBe('callerCancelled');
    await pushesSettled(ps, [callId]);

    const call = (await getCall(caller, callId)).json;
    expect(await endSeenMark(seen, callId)).toBe(call.revision);
    expect(alertsTo(seen)).toEqual([]);
    expect(alertsTo(away)).toHaveLength(1);
    skipped.ios++;
    // One installation was alerted: the record says an alert went out.
    expect(await missedRecord(seen.d, callId)).toMatchObject({ missed: true, missedCallAlert: true });
    await closeSocket(seen);
  });

  it('gets no alert when the call rings out (unanswered), Android too; with every installation skipped the record says no alert went out', async () => {
    const caller = inst(short.url, uid('alice'), 'Alice');
    const bob = uid('bob');
    const [ios, android] = [await iPhone(bob), await androidPhone(bob)];
    await Promise.all([online(ios), online(android)]);
    const { callId } = await createCall(caller, bob);
    await Promise.all([rings(ios, callId), rings(android, callId)]);
    expect(await endOnSocket(ios, callId, 10_000)).toBe('unanswered');
    expect(await endOnSocket(android, callId)).toBe('unanswered');
    await pushesSettled(ps, [callId]);

    expect(alertsTo(ios)).toEqual([]);
    expect(alertsTo(android)).toEqual([]);
    skipped.ios++;
    skipped.android++;
    expect(await missedRecord(ios.d, callId)).toMatchObject({ missed: true, missedCallAlert: false });
    await Promise.all([closeSocket(ios), closeSocket(android)]);
  });

  it('a group member that rang and got the end (the caller ended it for all) gets none; a member who never rang gets one', async () => {
    const caller = inst(url, uid('alice'), 'Alice');
    const [bob, carol, dave] = [uid('bob'), uid('carol'), uid('dave')];
    const [bobIos, carolIos, daveIos] = [await iPhone(bob), await iPhone(carol), await iPhone(dave)];
    await Promise.all([online(bobIos), online(carolIos)]);
    const callId = randomUUID();
    const created = await caller.api.post('/v1/calls', { callId, calleeUserIds: [bob, carol, dave], operationId: uid('op') });
    expect(created.status, created.text).toBe(201);
    await rings(carolIos, callId);
    await bobIos.ws!.until(() => bobIos.ws!.events().some((e) => e.callId === callId && e.type === 'call.invited'), 5000, 'the invitation');
    expect((await answer(bobIos.d, callId)).status).toBe(200);
    const ended = await caller.api.post(`/v1/calls/${callId}/end`, { operationId: uid('op'), reason: 'localHangup', forAll: true });
    expect(ended.status, ended.text).toBe(200);
    expect(await endOnSocket(carolIos, callId)).toBe('remoteEnded');
    // Bob was in the call: his end is the answered call's, for his installation only, and marks nothing.
    expect(await endOnSocket(bobIos, callId)).toBe('remoteEnded');
    await pushesSettled(ps, [callId]);

    expect(alertsTo(carolIos)).toEqual([]);
    skipped.ios++;
    expect(alertsTo(daveIos)).toHaveLength(1);
    expect(alertsTo(bobIos)).toEqual([]);
    expect(await endSeenMark(bobIos, callId)).toBeNull();
    await Promise.all([closeSocket(bobIos), closeSocket(carolIos)]);
  });
});

describe('an installation gets the alert', () => {
  it('when it rang but its socket closed before the end', async () => {
    const caller = inst(url, uid('alice'), 'Alice');
    const bob = uid('bob');
    const gone = await iPhone(bob);
    await online(gone);
    const { callId } = await createCall(caller, bob);
    await rings(gone, callId);
    await closeSocket(gone);
    expect((await end(caller, callId, 'localHangup')).status).toBe(200);
    await pushesSettled(ps, [callId]);

    expect(await rangMark(gone, callId)).toBe('1');
    expect(await endSeenMark(gone, callId)).toBeNull();
    expect(alertsTo(gone)).toHaveLength(1);
    expect(await missedRecord(gone.d, callId)).toMatchObject({ missed: true, missedCallAlert: true });
  });

  it('when its socket got the end but it never sent a ringing receipt', async () => {
    const caller = inst(url, uid('alice'), 'Alice');
    const bob = uid('bob');
    const quiet = await iPhone(bob);
    await online(quiet);
    const { callId } = await createCall(caller, bob);
    await quiet.ws!.until(() => quiet.ws!.events().some((e) => e.callId === callId && e.type === 'call.invited'), 5000, 'the invitation');
    expect((await end(caller, callId, 'localHangup')).status).toBe(200);
    expect(await endOnSocket(quiet, callId)).toBe('callerCancelled');
    await pushesSettled(ps, [callId]);

    expect(await rangMark(quiet, callId)).toBeNull();
    expect(await endSeenMark(quiet, callId)).toBe((await getCall(caller, callId)).json.revision);
    expect(alertsTo(quiet)).toHaveLength(1);
    await closeSocket(quiet);
  });

  it('when it rang again for a second call but saw only the first one\'s end (the marks are per call)', async () => {
    const caller = inst(url, uid('alice'), 'Alice');
    const bob = uid('bob');
    const phone = await iPhone(bob);
    await online(phone);
    const first = await createCall(caller, bob);
    await rings(phone, first.callId);
    expect((await end(caller, first.callId, 'localHangup')).status).toBe(200);
    await endOnSocket(phone, first.callId);
    await closeSocket(phone);
    // The second call rings it by push; its receipt goes over HTTP.
    const second = await createCall(caller, bob);
    const receipt = await phone.d.api.post(`/v1/calls/${second.callId}/ringing`, { operationId: uid('op'), via: 'apns' });
    expect(receipt.status, receipt.text).toBe(200);
    expect((await end(caller, second.callId, 'localHangup')).status).toBe(200);
    await pushesSettled(ps, [first.callId, second.callId]);

    expect(await rangMark(phone, second.callId)).toBe('1');
    const alerted = (apnsTo(ps.apns, phone.alertToken) as { headers: Record<string, string> }[]).map((r) => r.headers['apns-collapse-id']);
    expect(alerted).toEqual([second.callId]);
    skipped.ios++;
  });
});

describe('answered calls', () => {
  it('write no mark: the answering installation\'s end is for it alone', async () => {
    const caller = inst(url, uid('alice'), 'Alice');
    const bob = uid('bob');
    const [taker, other] = [await iPhone(bob), await iPhone(bob)];
    await Promise.all([online(taker), online(other)]);
    const { callId } = await createCall(caller, bob);
    await Promise.all([rings(taker, callId), rings(other, callId)]);
    expect((await answer(taker.d, callId)).status).toBe(200);
    expect(await endOnSocket(other, callId)).toBe('answeredElsewhere');
    expect((await end(caller, callId, 'localHangup')).status).toBe(200);
    expect(await endOnSocket(taker, callId)).toBe('remoteEnded');
    await pushesSettled(ps, [callId]);

    expect(await endSeenMark(taker, callId)).toBeNull();
    expect(await endSeenMark(other, callId)).toBeNull();
    expect(alertsTo(taker)).toEqual([]);
    expect(alertsTo(other)).toEqual([]);
    await Promise.all([closeSocket(taker), closeSocket(other)]);
  });
});

describe('metrics and logs', () => {
  it('counts each skipped alert as skipped-seen, by platform', async () => {
    const e = await scrapeMetrics(ps.stack.servers[0]!.metricsUrl);
    const sample = (platform: string, result: string) =>
      e.samples.find((x) => x.name === 'calling_missed_call_pushes_total' && x.labels.platform === platform && x.labels.result === result)?.value ?? 0;
    expect(sample('ios', 'skipped-seen')).toBe(skipped.ios);
    expect(sample('android', 'skipped-seen')).toBe(skipped.android);
    // The alerts that went: Bob's Android phone, Dave, the closed socket, the silent one, the second call.
    expect(sample('ios', 'accepted')).toBe(4);
    expect(sample('android', 'accepted')).toBe(1);
  });

  it('no push token or session token in any log line', () => {
    const all = ps.stack.servers.map((s) => s.logs()).join('\n') + short.logs();
    expect(logRecords(all).length).toBeGreaterThan(0);
    for (const secret of secrets) expect(all).not.toContain(secret);
  });
});
