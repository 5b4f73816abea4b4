import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { answer, end, uid } from '../support/fixtures.js';
import { waitUntil } from './helpers.js';
import { apnsTo, callpayloadOf, fcmBody, fcmTo, phone, pushesSettled, pushStackForFile, type Phone, type PushStack } from './push-helpers.js';

/**
 * Group call pushes (docs/group-calls.md "Creating one", "Who receives what") against the fake
 * providers: every installation of every invitee is rung (iOS VoIP, Android HIGH), Android
 * installations whose ringing stops get the `call.ended` signal (NORMAL), iOS never gets one.
 */

let ps: PushStack;
let url: string;

pushStackForFile([], (s) => {
  [ps, url] = [s, s.url];
});

const invitesOf = (p: Phone) => (p.token.length === 64 ? apnsTo(ps.apns, p.token).map((r) => (r.body as Record<string, any>).callpayload) : fcmTo(ps.fcm, p.token, 'call.invited').map(callpayloadOf));
const signalsOf = (p: Phone) => fcmTo(ps.fcm, p.token).filter((m) => !['call.invited', 'call.missed'].includes(callpayloadOf(m).type));
/** Missed-call alerts (docs/protocol.md "Missed-call alerts"; test/e2e/push-missed-calls.test.ts). */
const missedOf = (p: Phone) => fcmTo(ps.fcm, p.token, 'call.missed');

describe('group call pushes', () => {
  it('ring every installation of every invitee, and signal each Android installation when its ringing stops', async () => {
    const caller = await phone(url, uid('alice'), 'androidPush');
    const [bob, carol, dave] = [uid('bob'), uid('carol'), uid('dave')];
    const bobIos = await phone(url, bob, 'iosVoip');
    const bobAndroid = await phone(url, bob, 'androidPush');
    const carol1 = await phone(url, carol, 'androidPush');
    const carol2 = await phone(url, carol, 'androidPush');
    const daveAndroid = await phone(url, dave, 'androidPush');
    const callId = randomUUID();
    const created = await caller.d.api.post('/v1/calls', { callId, calleeUserIds: [bob, carol], title: 'Standup', operationId: uid('op') });
    expect(created.status, created.text).toBe(201);
    const ringing = [bobIos, bobAndroid, carol1, carol2];
    await waitUntil('every invitation', () => ringing.every((p) => invitesOf(p).length === 1));
    for (const p of ringing) expect(invitesOf(p)[0]).toMatchObject({ type: 'call.invited', callId, displayName: 'Standup', revision: '1' });
    const ios = apnsTo(ps.apns, bobIos.token)[0]!;
    expect(ios.status).toBe(200);
    expect(ios.headers['apns-push-type']).toBe('voip');
    for (const p of [bobAndroid, carol1, carol2]) expect(fcmBody(fcmTo(ps.fcm, p.token)[0]!).message.android.priority).toBe('HIGH');

    // Bob joins on his iPhone: his Android stops ringing; nobody else is signalled.
    const joined = await answer(bobIos.d, callId);
    expect(joined.status, joined.text).toBe(200);
    // Carol declines on one phone: her other one stops ringing.
    expect((await end(carol1.d, callId, 'localHangup')).status).toBe(200);
    // Dave is rung into the live call.
    const invited = await bobIos.d.api.post(`/v1/calls/${callId}/invite`, { operationId: uid('op'), userIds: [dave] });
    expect(invited.status, invited.text).toBe(200);
    await waitUntil('dave rung', () => invitesOf(daveAndroid).length === 1);
    expect(invitesOf(daveAndroid)[0]).toMatchObject({ callId, revision: invited.json.revision, expiresAtMs: invited.json.participants[3].ringUntilMs });
    // Alice ends it for everyone: Dave, still ringing, is signalled.
    const ended = await caller.d.api.post(`/v1/calls/${callId}/end`, { operationId: uid('op'), reason: 'localHangup', forAll: true });
    expect(ended.status, ended.text).toBe(200);
    await pushesSettled(ps, [callId]);

    expect(signalsOf(bobAndroid).map(callpayloadOf)).toEqual([expect.objectContaining({ type: 'call.ended', reason: 'answeredElsewhere', revision: joined.json.revision })]);
    expect(signalsOf(carol2).map(callpayloadOf)).toEqual([expect.objectContaining({ type: 'call.ended', reason: 'declined' })]);
    expect(signalsOf(daveAndroid).map(callpayloadOf)).toEqual([expect.objectContaining({ type: 'call.ended', reason: 'remoteEnded', revision: ended.json.revision })]);
    for (const p of [carol1, caller]) expect(signalsOf(p)).toEqual([]);
    for (const m of [...signalsOf(bobAndroid), ...signalsOf(carol2), ...signalsOf(daveAndroid)]) expect(fcmBody(m).message.android.priority).toBe('NORMAL');
    // Dave was still ringing at the end: he missed the call, and only he.
    expect(missedOf(daveAndroid).map(callpayloadOf)).toEqual([expect.objectContaining({ type: 'call.missed', callId, userId: dave })]);
    for (const p of [bobAndroid, carol1, carol2, caller]) expect(missedOf(p)).toEqual([]);
    // iOS only ever got its invitation; nobody was rung twice.
    expect(apnsTo(ps.apns, bobIos.token)).toHaveLength(1);
    for (const p of [...ringing, daveAndroid]) expect(invitesOf(p)).toHaveLength(1);
  });
});
