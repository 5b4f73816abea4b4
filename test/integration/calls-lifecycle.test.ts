import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { stackForFile } from '../support/stack.js';
import {
  acceptedCall,
  answer,
  device,
  end,
  eventsUntil,
  expectJson,
  expectProblem,
  getCall,
  headCursor,
  ringingCall,
  sleep,
  uid,
} from '../support/fixtures.js';

/**
 * docs/protocol.md "States and transitions": one test per row of the table, named after the row
 * (From | What happens | Condition → To | Also), run against a real server with all roles
 * (api, gateway, worker), so the "Also" column is observed in the devices' event logs
 * (GET /v1/call-events) exactly as the outbox relay delivers it.
 *
 * The client-side states (`connecting`, `active`) that section 3 also names are client-only:
 * the server never stores or reports them, so they have no test here.
 */

const RING_TIMEOUT_MS = 45_000;
const SHORT_RING_TIMEOUT_MS = 1_000;

/** The default server (45 s ring timeout). */
let url: string;
/** A second server on the same Redis with the shortest ring timeout, for the expiry rows. */
let shortUrl: string;

stackForFile({}, async (s) => {
  url = s.url;
  shortUrl = (await s.addServer({ RING_TIMEOUT_MS: String(SHORT_RING_TIMEOUT_MS) })).url;
});

const byType = (events: { type: string }[], type: string) => events.filter((e) => e.type === type);

describe('states and transitions (docs/protocol.md)', () => {
  it('(none) → ringing | POST /v1/calls | valid request → snapshot returned; invitations queued in the same transaction', async () => {
    const caller = device(url, uid('alice'), uid('alice-phone'), 'Alice Caller');
    const calleePhone = device(url);
    const calleeTablet = device(url, calleePhone.userId);
    const cursors = await Promise.all([headCursor(calleePhone), headCursor(calleeTablet)]);
    const callId = randomUUID();
    const before = Date.now();

    const res = await caller.api.post('/v1/calls', { callId, calleeUserId: calleePhone.userId, operationId: uid('op') });

    expectJson(res, 201);
    const createdAtMs = res.json.createdAtMs as number;
    expect(createdAtMs).toBeGreaterThanOrEqual(before - 1000);
    expect(createdAtMs).toBeLessThanOrEqual(Date.now() + 1000);
    // Exactly the ringing-form snapshot (docs/protocol.md "Call snapshot"), in a fixed field order.
    expect(res.text).toBe(
      JSON.stringify({
        schemaVersion: 1,
        callId,
        revision: '1',
        state: 'ringing',
        caller: { userId: caller.userId, displayName: 'Alice Caller', handle: `app:${caller.userId}` },
        calleeUserId: calleePhone.userId,
        createdAtMs,
        expiresAtMs: createdAtMs + RING_TIMEOUT_MS,
        video: false,
      }),
    );
    // The call is stored: both parties read the same snapshot.
    expect((await getCall(caller, callId)).text).toBe(res.text);
    expect((await getCall(calleePhone, callId)).text).toBe(res.text);

    // The invitation went out with the change: every callee device gets call.invited (docs/protocol.md "Who receives what").
    for (const [i, d] of [calleePhone, calleeTablet].entries()) {
      const events = await eventsUntil(d, cursors[i]!, (e) => e.length >= 1);
      expect(events).toEqual([
        {
          schemaVersion: 1,
          type: 'call.invited',
          callId,
          displayName: 'Alice Caller',
          handle: `app:${caller.userId}`,
          eventId: expect.any(String),
          revision: '1',
          issuedAtMs: createdAtMs,
          expiresAtMs: createdAtMs + RING_TIMEOUT_MS,
          video: false,
        },
      ]);
    }
  });

  it('ringing → accepted | POST /v1/calls/{id}/answer | first answer, call unexpired → winning installation recorded; call.accepted sent; other devices of the user receive call.ended with reason answeredElsewhere', async () => {
    const caller = device(url);
    const d1 = device(url);
    const d2 = device(url, d1.userId);
    const d3 = device(url, d1.userId);
    const cursors = await Promise.all([caller, d1, d2, d3].map(headCursor));
    const { callId, created } = await ringingCall(url, caller, d1);

    const res = await answer(d2, callId, { expectedRevision: '1' });

    expectJson(res, 200);
    expect(res.json).toEqual({
      ...created.json,
      revision: '2',
      state: 'accepted',
      answeredByInstallationId: d2.installationId,
      acceptedAtMs: expect.any(Number),
    });
    expect(res.json.acceptedAtMs).toBeGreaterThanOrEqual(created.json.createdAtMs);
    expect(res.json.acceptedAtMs).toBeLessThan(created.json.expiresAtMs);
    // Recorded: the caller reads the same winner.
    expect((await getCall(caller, callId)).json).toEqual(res.json);

    // call.accepted to the caller.
    const callerEvents = await eventsUntil(caller, cursors[0]!, (e) => byType(e, 'call.accepted').length >= 1);
    expect(byType(callerEvents, 'call.accepted')).toEqual([
      {
        schemaVersion: 1,
        eventId: expect.any(String),
        type: 'call.accepted',
        callId,
        revision: '2',
        occurredAtMs: res.json.acceptedAtMs,
        answeredByInstallationId: d2.installationId,
      },
    ]);
    // Every other device of the callee stops ringing with answeredElsewhere.
    for (const [i, d] of [d1, d3].entries()) {
      const events = await eventsUntil(d, cursors[i === 0 ? 1 : 3]!, (e) => byType(e, 'call.ended').length >= 1);
      expect(events.map((e) => e.type)).toEqual(['call.invited', 'call.ended']);
      expect(events[1]).toEqual({
        schemaVersion: 1,
        eventId: expect.any(String),
        type: 'call.ended',
        callId,
        revision: '2',
        occurredAtMs: res.json.acceptedAtMs,
        reason: 'answeredElsewhere',
      });
    }
    // The winner is not told that it lost (its log already holds the answeredElsewhere entry).
    const winnerEvents = await eventsUntil(d2, cursors[2]!, (e) => e.length >= 1);
    expect(winnerEvents.map((e) => e.type)).toEqual(['call.invited']);
  });

  it('ringing → unchanged | POST /v1/calls/{id}/answer | another device already won, or call expired → caller of the request receives the winner’s snapshot or a conflict; no media session', async () => {
    // Another device already won.
    const { callId, callee: winner, answered } = await acceptedCall(url);
    const loser = device(url, winner.userId);
    const lost = await answer(loser, callId);
    expectProblem(lost, 'answer_conflict', 'the call was answered by another installation', ['snapshot']);
    expect(lost.json.snapshot).toEqual(answered.json);
    expect(lost.json.snapshot.answeredByInstallationId).toBe(winner.installationId);
    expect((await getCall(winner, callId)).text).toBe(answered.text);
    const media = await loser.api.post(`/v1/calls/${callId}/media-session`, {});
    expectProblem(media, 'answer_conflict', 'the call was answered by another installation', ['snapshot']);
    expect(media.json.snapshot).toEqual(answered.json);

    // The call expired (ring timeout 1 s on the second server).
    const expired = await ringingCall(shortUrl, device(shortUrl), device(shortUrl));
    await sleep(expired.created.json.expiresAtMs - Date.now() + 100);
    const late = await answer(expired.callee, expired.callId);
    expectProblem(late, 'answer_conflict', 'the call is ended and can no longer be answered', ['snapshot']);
    expect(late.json.snapshot).toMatchObject({ state: 'ended', endReason: 'unanswered', revision: '2' });
    expect(late.json.snapshot.answeredByInstallationId).toBeUndefined();
    const lateMedia = await expired.callee.api.post(`/v1/calls/${expired.callId}/media-session`, {});
    expectProblem(lateMedia, 'forbidden', 'media credentials are issued only to the installations in an accepted call; this call is ended');
  });

  it('ringing → ended (callerCancelled) | POST /v1/calls/{id}/end | caller cancels before answer → call.ended sent to every callee device', async () => {
    const caller = device(url);
    const phone = device(url);
    const tablet = device(url, phone.userId);
    const cursors = await Promise.all([headCursor(phone), headCursor(tablet)]);
    const { callId, created } = await ringingCall(url, caller, phone);

    const res = await end(caller, callId, 'localHangup');

    expectJson(res, 200);
    expect(res.json).toEqual({ ...created.json, revision: '2', state: 'ended', endedAtMs: expect.any(Number), endReason: 'localHangup' });
    const calleeView = await getCall(phone, callId);
    expect(calleeView.json).toEqual({ ...res.json, endReason: 'callerCancelled' });
    for (const [i, d] of [phone, tablet].entries()) {
      const events = await eventsUntil(d, cursors[i]!, (e) => byType(e, 'call.ended').length >= 1);
      expect(events.map((e) => e.type)).toEqual(['call.invited', 'call.ended']);
      expect(events[1]).toMatchObject({ type: 'call.ended', callId, revision: '2', reason: 'callerCancelled', occurredAtMs: res.json.endedAtMs });
    }
  });

  it('ringing → ended (unanswered) | server timer at expiresAtMs | still ringing → both sides told', async () => {
    const caller = device(shortUrl);
    const callee = device(shortUrl);
    const cursors = await Promise.all([headCursor(caller), headCursor(callee)]);
    const { callId, created } = await ringingCall(shortUrl, caller, callee);
    expect(created.json.expiresAtMs - created.json.createdAtMs).toBe(SHORT_RING_TIMEOUT_MS);
    await sleep(created.json.expiresAtMs - Date.now() + 100);

    const res = await getCall(caller, callId);

    expectJson(res, 200);
    expect(res.json).toEqual({ ...created.json, revision: '2', state: 'ended', endedAtMs: expect.any(Number), endReason: 'unanswered' });
    expect(res.json.endedAtMs).toBeGreaterThanOrEqual(created.json.expiresAtMs);
    expect((await getCall(callee, callId)).json).toEqual(res.json);
    for (const [i, d] of [caller, callee].entries()) {
      const events = await eventsUntil(d, cursors[i]!, (e) => byType(e, 'call.ended').length >= 1);
      expect(byType(events, 'call.ended')).toEqual([
        { schemaVersion: 1, eventId: expect.any(String), type: 'call.ended', callId, revision: '2', occurredAtMs: res.json.endedAtMs, reason: 'unanswered' },
      ]);
    }
  });

  it('ringing → ended (declined) | POST /v1/calls/{id}/end | callee declines → caller told', async () => {
    const caller = device(url);
    const phone = device(url);
    const tablet = device(url, phone.userId);
    const cursors = await Promise.all([caller, phone, tablet].map(headCursor));
    const { callId, created } = await ringingCall(url, caller, phone);

    const res = await end(phone, callId, 'declined');

    expectJson(res, 200);
    expect(res.json).toEqual({ ...created.json, revision: '2', state: 'ended', endedAtMs: expect.any(Number), endReason: 'declined' });
    expect((await getCall(caller, callId)).json).toEqual(res.json);
    const callerEvents = await eventsUntil(caller, cursors[0]!, (e) => e.length >= 1);
    expect(callerEvents).toEqual([
      { schemaVersion: 1, eventId: expect.any(String), type: 'call.ended', callId, revision: '2', occurredAtMs: res.json.endedAtMs, reason: 'declined' },
    ]);
    // The callee's other devices stop ringing too; the declining device is not told its own end.
    const tabletEvents = await eventsUntil(tablet, cursors[2]!, (e) => byType(e, 'call.ended').length >= 1);
    expect(byType(tabletEvents, 'call.ended')).toMatchObject([{ callId, reason: 'declined' }]);
    const phoneEvents = await eventsUntil(phone, cursors[1]!, (e) => e.length >= 1);
    expect(phoneEvents.map((e) => e.type)).toEqual(['call.invited']);
  });

  it('accepted → ended | POST /v1/calls/{id}/end | either party hangs up → terminal snapshot returned; other side told with reason remoteEnded', async () => {
    for (const hangsUp of ['caller', 'callee'] as const) {
      const caller = device(url);
      const callee = device(url);
      const cursors = await Promise.all([headCursor(caller), headCursor(callee)]);
      const { callId, answered } = await acceptedCall(url, caller, callee);
      const [ender, other, otherCursor] = hangsUp === 'caller' ? [caller, callee, cursors[1]!] : [callee, caller, cursors[0]!];

      const res = await end(ender, callId, 'localHangup');

      expectJson(res, 200);
      expect(res.json, hangsUp).toEqual({
        ...answered.json,
        revision: '3',
        state: 'ended',
        endedAtMs: expect.any(Number),
        endReason: 'localHangup',
      });
      expect((await getCall(other, callId)).json, hangsUp).toEqual({ ...res.json, endReason: 'remoteEnded' });
      const events = await eventsUntil(other, otherCursor, (e) => byType(e, 'call.ended').length >= 1);
      expect(byType(events, 'call.ended'), hangsUp).toEqual([
        { schemaVersion: 1, eventId: expect.any(String), type: 'call.ended', callId, revision: '3', occurredAtMs: res.json.endedAtMs, reason: 'remoteEnded' },
      ]);
    }
  });

  it('a retry of create, answer or end with the same operationId returns the original outcome', async () => {
    const caller = device(url);
    const callee = device(url);
    const callId = randomUUID();
    const createBody = { callId, calleeUserId: callee.userId, operationId: uid('op') };
    const created = await caller.api.post('/v1/calls', createBody);
    const answerBody = { operationId: uid('op'), installationId: callee.installationId };
    const answered = await callee.api.post(`/v1/calls/${callId}/answer`, answerBody);
    const endBody = { operationId: uid('op'), reason: 'localHangup' };
    const ended = await caller.api.post(`/v1/calls/${callId}/end`, endBody);
    expect([created.status, answered.status, ended.status]).toEqual([201, 200, 200]);

    const retries = [
      await caller.api.post('/v1/calls', createBody),
      await callee.api.post(`/v1/calls/${callId}/answer`, answerBody),
      await caller.api.post(`/v1/calls/${callId}/end`, endBody),
    ];
    expect(retries.map((r) => [r.status, r.text])).toEqual([created, answered, ended].map((r) => [r.status, r.text]));
  });
});
