import { describe, expect, it } from 'vitest';
import { forFile, startStack } from '../support/stack.js';
import { connect } from '../support/ws-client.js';
import { newSecret, startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';
import { waitUntil } from '../support/wait.js';
import { acceptedCall, device, end, eventsUntil, expectJson, expectProblem, getCall, headCursor, ringingCall, sibling, uid, type Device } from '../support/fixtures.js';
import { groupCall } from '../support/groupCall.js';
import { readAllEvents } from './helpers.js';

/**
 * Moving a live call to another installation of a user in it (docs/protocol.md "Moving a call"),
 * over HTTP against real server processes: the call keeps its callId and stays accepted, the
 * installation left is told `movedElsewhere`, the others in the call `call.moved`; idempotent by
 * operationId, only the same user's installations, one winner when two move at once.
 */

let url: string;
let hooks: WebhookReceiver;
const secret = newSecret();
forFile(
  async () => {
    hooks = await startWebhookReceiver([secret]);
    const webhooks = [{ id: 'moves', url: hooks.url, secret, events: ['call.moved', 'call.ended'] }];
    const stack = await startStack({ TURN_SECRET: 'move-test-turn-secret', TURN_URLS: 'turn:127.0.0.1:3478', WEBHOOKS: JSON.stringify(webhooks) });
    return {
      stack,
      async stop() {
        await stack.stop();
        await hooks.close();
      },
    };
  },
  (s) => (url = s.stack.url),
);

function move(d: Device, callId: string, expectedRevision: string, operationId = uid('op')) {
  return d.api.post(`/v1/calls/${callId}/move`, { operationId, installationId: d.installationId, expectedRevision });
}

describe('moving a one-to-one call', () => {
  it("the callee's tablet takes the call from the phone: the phone is told movedElsewhere, the caller call.moved", async () => {
    const { callId, caller, callee: phone, answered } = await acceptedCall(url);
    const tablet = sibling(url, phone);
    const [callerCursor, phoneCursor, tabletCursor] = await Promise.all([headCursor(caller), headCursor(phone), headCursor(tablet)]);

    const moved = await move(tablet, callId, answered.json.revision as string);
    expectJson(moved, 200);
    expect(moved.json).toEqual({ ...answered.json, revision: '3', answeredByInstallationId: tablet.installationId });

    // What the move (revision 3) told each: the cursors may predate the answer's own events,
    // which the relay appends asynchronously (on a cluster they can come after the cursors).
    const ofMove = (es: any[]) => es.filter((e) => e.callId === callId && e.revision === '3');
    const phoneEvents = await eventsUntil(phone, phoneCursor, (es) => ofMove(es).length >= 1);
    expect(ofMove(phoneEvents)).toEqual([expect.objectContaining({ type: 'call.ended', callId, reason: 'movedElsewhere', revision: '3' })]);
    const callerEvents = await eventsUntil(caller, callerCursor, (es) => ofMove(es).length >= 1);
    expect(ofMove(callerEvents)).toEqual([
      { schemaVersion: 1, type: 'call.moved', eventId: `${callId}:3:moved.${phone.userId}`, callId, revision: '3', occurredAtMs: expect.any(Number), userId: phone.userId, installationId: tablet.installationId },
    ]);
    // The tablet has the reply: nothing of the move in its log.
    expect(ofMove((await tablet.api.get(`/v1/call-events?cursor=${encodeURIComponent(tabletCursor)}`)).json.events)).toEqual([]);

    // Media goes with the call: the tablet gets credentials, the phone no longer does.
    expect((await tablet.api.post(`/v1/calls/${callId}/media-session`, {})).status).toBe(200);
    expectProblem(await phone.api.post(`/v1/calls/${callId}/media-session`, {}), 'answer_conflict', 'the call was answered by another installation', ['snapshot']);

    // The phone's hang-up (it was told the call moved) changes nothing; the tablet's ends it.
    expectJson(await end(phone, callId, 'localHangup'), 200);
    expect((await getCall(caller, callId)).json).toMatchObject({ state: 'accepted', revision: '3' });
    expectJson(await end(phone, callId, 'movedElsewhere'), 200);
    const ended = await end(tablet, callId, 'localHangup');
    expect(ended.json).toMatchObject({ state: 'ended', endReason: 'localHangup', revision: '4' });
  });

  it('the caller moves too; a retry with the same operationId replays, a reused one with another request conflicts', async () => {
    const { callId, caller, answered } = await acceptedCall(url);
    const laptop = sibling(url, caller);
    const op = uid('op');
    const first = await move(laptop, callId, '2', op);
    expectJson(first, 200);
    expect(first.json.revision).toBe('3');
    const replay = await move(laptop, callId, '2', op);
    expect(replay.text).toBe(first.text);
    expectProblem(await move(laptop, callId, '3', op), 'idempotency_conflict', /.+/);
    // Moving to where it already is: nothing changes.
    const again = await move(laptop, callId, '3');
    expect(again.text).toBe(first.text);
    expect(answered.json.caller).toEqual(first.json.caller);
  });

  it('two installations moving at once: exactly one wins, the other gets revision_conflict', async () => {
    const { callId, callee } = await acceptedCall(url);
    const others = Array.from({ length: 6 }, () => sibling(url, callee));
    const results = await Promise.all(others.map((d) => move(d, callId, '2')));
    const won = results.filter((r) => r.status === 200);
    expect(won).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 200)) expectProblem(r, 'revision_conflict', /.+/, ['snapshot']);
    const winner = others[results.indexOf(won[0]!)]!;
    expect((await getCall(callee, callId)).json).toMatchObject({ state: 'accepted', revision: '3', answeredByInstallationId: winner.installationId });
  });

  it('refusals change nothing: a ringing call, an ended call, another user, another installation id in the body', async () => {
    const ringing = await ringingCall(url);
    expectProblem(await move(sibling(url, ringing.callee), ringing.callId, '1'), 'not_in_call', 'the call is ringing: only an accepted call moves', ['snapshot']);
    expectProblem(await move(sibling(url, ringing.caller), ringing.callId, '1'), 'not_in_call', /.+/, ['snapshot']);
    expect((await getCall(ringing.caller, ringing.callId)).text).toBe(ringing.created.text);

    const { callId, caller, answered } = await acceptedCall(url);
    expectProblem(await move(device(url), callId, '2'), 'not_found', 'call not found');
    const tablet = sibling(url, caller);
    expectProblem(await tablet.api.post(`/v1/calls/${callId}/move`, { operationId: uid('op'), installationId: 'someone-else', expectedRevision: '2' }), 'forbidden', /.+/);
    expectProblem(await tablet.api.post(`/v1/calls/${callId}/move`, { operationId: uid('op'), installationId: tablet.installationId }), 'invalid_request', /expectedRevision/);
    expect((await getCall(caller, callId)).text).toBe(answered.text);

    expectJson(await end(caller, callId, 'localHangup'), 200);
    expectProblem(await move(tablet, callId, '3'), 'not_in_call', 'the call is ended: only an accepted call moves', ['snapshot']);
  });
});

describe('moving over the socket, and what the app backend and history see', () => {
  it('a `move` frame moves the call as the route does; the webhook call.moved names both installations; the history keeps the one at the end', async () => {
    const { callId, caller, callee: phone } = await acceptedCall(url);
    const tablet = sibling(url, phone);
    const socket = await connect(url, tablet.token);
    try {
      const reply = await socket.command({ type: 'move', callId, operationId: uid('op'), installationId: tablet.installationId, expectedRevision: '2' });
      expect(reply).toMatchObject({ type: 'reply', status: 200, body: { callId, state: 'accepted', revision: '3', answeredByInstallationId: tablet.installationId } });
    } finally {
      await socket.close();
    }
    expectJson(await end(caller, callId, 'localHangup'), 200);

    const ofCall = (type: string) => [...hooks.unique().values()].filter((w) => w.json?.type === type && w.json?.data?.callId === callId);
    await waitUntil('the webhooks of the move and the end', () => ofCall('call.moved').length === 1 && ofCall('call.ended').length === 1);
    expect(ofCall('call.moved')[0]!.json.data).toEqual({
      callId,
      callerUserId: caller.userId,
      userId: phone.userId,
      fromInstallationId: phone.installationId,
      toInstallationId: tablet.installationId,
      occurredAtMs: expect.any(Number),
    });
    expect(ofCall('call.ended')[0]!.json.data).toMatchObject({ answeredByInstallationId: tablet.installationId, reasons: { caller: 'localHangup', callee: 'remoteEnded' } });

    await waitUntil('the history records', async () => ((await phone.api.get('/v1/calls')).json.calls ?? []).some((r: { callId: string }) => r.callId === callId));
    const record = ((await tablet.api.get('/v1/calls')).json.calls as { callId: string }[]).find((r) => r.callId === callId);
    expect(record).toMatchObject({ direction: 'incoming', answeredByInstallationId: tablet.installationId, endReason: 'remoteEnded' });
  });
});

describe('moving a group call', () => {
  it('a member moves its own membership: the installation left is told movedElsewhere, everyone in the call call.moved', async () => {
    const { callId, caller, members } = await groupCall(url, 3, { joined: 2 });
    const [m1, m2, m3] = members as [Device, Device, Device];
    const m1Tablet = sibling(url, m1);
    const cursors = await Promise.all([caller, m1, m2, m3].map(headCursor));
    const before = (await getCall(m1, callId)).json;

    const moved = await move(m1Tablet, callId, before.revision as string);
    expectJson(moved, 200);
    const revision = moved.json.revision as string;
    expect(Number(revision)).toBe(Number(before.revision) + 1);
    expect(moved.json.participants.find((m: { userId: string }) => m.userId === m1.userId)).toMatchObject({ state: 'joined', installationId: m1Tablet.installationId });

    // The move's events (the joins' may still be on their way when the cursors were taken).
    const ofMove = async (d: Device, cursor: string) => (await eventsUntil(d, cursor, (es) => es.some((e) => e.revision === revision))).filter((e) => e.revision === revision);
    const expected = { type: 'call.moved', callId, revision, userId: m1.userId, installationId: m1Tablet.installationId };
    expect(await ofMove(caller, cursors[0]!)).toEqual([expect.objectContaining(expected)]);
    expect(await ofMove(m2, cursors[2]!)).toEqual([expect.objectContaining(expected)]);
    expect(await ofMove(m1, cursors[1]!)).toEqual([expect.objectContaining({ type: 'call.ended', reason: 'movedElsewhere', revision })]);
    // m3 is still ringing, not in the call: it hears nothing of the move (the caller's copy came, so
    // the relay has passed it).
    expect((await readAllEvents(m3, cursors[3]!)).events.filter((e) => e.revision === revision)).toEqual([]);

    // m3 (ringing) cannot move: it is not in the call.
    expectProblem(await move(sibling(url, m3), callId, revision), 'not_in_call', 'you are not in this call: only a member in it moves it', ['snapshot']);
    // The old installation's leave changes nothing; the tablet's leave takes m1 out.
    expectJson(await end(m1, callId, 'localHangup'), 200);
    expect((await getCall(caller, callId)).json.participants.find((m: { userId: string }) => m.userId === m1.userId).state).toBe('joined');
    const left = await end(m1Tablet, callId, 'localHangup');
    expect(left.json.participants.find((m: { userId: string }) => m.userId === m1.userId).state).toBe('left');
  });
});
