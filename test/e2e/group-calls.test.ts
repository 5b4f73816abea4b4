import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { stackForFile, type Stack } from '../support/stack.js';
import { answer, DEFAULT_CALL_SHARDS, end, expectProblem, getCall, uid } from '../support/fixtures.js';
import { Sockets, createCall, expectInvited, online, settleByBarrier, user, waitUntil, type OnlineDevice } from './helpers.js';
import { keys } from '../../src/redis/keys.js';
import type { EventPayload } from '../support/ws-client.js';

/**
 * Group calls (docs/group-calls.md) over real WebSockets: for each transition, each installation
 * gets exactly its events and nothing more (settleByBarrier), and the snapshot shows each
 * member's state.
 */

let stack: Stack;
let url: string;
const sockets = Sockets.closedAfterEachTest();

stackForFile({ GROUP_CALL_MAX_MEMBERS: '4' }, (s) => {
  stack = s;
  url = s.url;
});

/** Alice (two installations, the first calls), and `n` invitees with two installations each, all online. */
async function people(n: number) {
  const [a1, a2] = sockets.add(await online(user(url, 2, 'Alice Caller'), url)) as [OnlineDevice, OnlineDevice];
  const invitees: [OnlineDevice, OnlineDevice][] = [];
  for (let i = 0; i < n; i++) invitees.push(sockets.add(await online(user(url, 2, `Member ${i}`), url)) as [OnlineDevice, OnlineDevice]);
  return { a1, a2, invitees };
}

/** A ringing group call from a1 to every invitee, each of whose installations has its invitation. */
async function ringingGroup(n: number, extra: Record<string, unknown> = {}) {
  const p = await people(n);
  const call = await createCall(p.a1, '', { calleeUserId: undefined, calleeUserIds: p.invitees.map(([d]) => d.userId), ...extra });
  await Promise.all(p.invitees.flat().map((d) => d.ws.waitForEvents(1)));
  return { ...p, call, callId: call.callId };
}

const participant = (e: EventPayload | undefined) => e && { type: e.type, userId: e.userId, state: e.state };
const states = (snapshot: Record<string, any>) => Object.fromEntries((snapshot.participants as { userId: string; state: string }[]).map((p) => [p.userId, p.state]));

function ok(res: { status: number; text: string; json: any }, status = 200): Record<string, any> {
  expect(res.status, res.text).toBe(status);
  return res.json as Record<string, any>;
}

describe('group calls', () => {
  it('create: every installation of every invitee gets the invitation, with the title as displayName; the snapshot lists the members', async () => {
    const g = await ringingGroup(3, { title: 'Team standup' });
    const s = g.call.snapshot;
    expect(s.state).toBe('ringing');
    expect(s.calleeUserId).toBe('');
    expect(s.title).toBe('Team standup');
    expect(s.participants.map((p: any) => [p.userId, p.state])).toEqual([[g.a1.userId, 'joined'], ...g.invitees.map(([d]) => [d.userId, 'invited'])]);
    expect(s.participants[0].installationId).toBe(g.a1.installationId);
    const expected: [OnlineDevice, number][] = [[g.a1, 0], [g.a2, 0], ...g.invitees.flat().map((d): [OnlineDevice, number] => [d, 1])];
    const got = await settleByBarrier(url, g.callId, expected);
    for (const [i, [d]] of expected.entries()) {
      if (got[i]!.length === 0) continue;
      const inv = got[i]![0]!;
      expectInvited(inv, { snapshot: { ...s, caller: { ...s.caller, displayName: 'Team standup' } } });
      expect(inv.expiresAtMs, d.installationId).toBe(s.participants.find((p: any) => p.userId === d.userId).ringUntilMs);
    }
  });

  it('bad create requests are refused with problem+json and create nothing', async () => {
    const [a] = user(url, 1);
    const [b] = user(url, 1);
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ calleeUserIds: [b!.userId, b!.userId] }, /calleeUserIds: must not list a user twice/],
      [{ calleeUserIds: [b!.userId, a!.userId] }, /calleeUserIds: you cannot call yourself/],
      [{ calleeUserIds: ['u1', 'u2', 'u3', 'u4', 'u5'] }, /calleeUserIds: at most 4 users/],
      [{ calleeUserIds: [] }, /calleeUserIds: must list at least one user/],
      [{ calleeUserIds: [b!.userId], calleeUserId: b!.userId }, /calleeUserId: give either calleeUserId \(a one-to-one call\) or calleeUserIds \(a group call\), not both/],
      [{ calleeUserIds: 'bob' }, /calleeUserIds: Invalid input: expected array, received string/],
      [{}, /calleeUserId: Invalid input: expected string, received undefined/],
    ];
    for (const [body, detail] of cases) {
      const callId = randomUUID();
      expectProblem(await a!.api.post('/v1/calls', { callId, operationId: uid('op'), ...body }), 'invalid_request', detail);
      expectProblem(await getCall(a!, callId), 'not_found', 'call not found');
    }
  });

  it('join: the first installation of a member wins; its other installation stops ringing; those in the call are told; a second join gets 409', async () => {
    const g = await ringingGroup(2);
    const [[b1, b2], [c1, c2]] = g.invitees as [[OnlineDevice, OnlineDevice], [OnlineDevice, OnlineDevice]];
    const joined = ok(await answer(b1, g.callId));
    expect(joined.state).toBe('accepted');
    expect(states(joined)).toEqual({ [g.a1.userId]: 'joined', [b1.userId]: 'joined', [c1.userId]: 'invited' });
    // Over a socket frame, the same outcome as over HTTP: 409 with the winner in the snapshot.
    const second = await b2.ws.command({ type: 'answer', callId: g.callId, operationId: uid('op'), installationId: b2.installationId });
    expect(second.status).toBe(409);
    expect((second.body as any).code).toBe('answer_conflict');
    expect((second.body as any).snapshot.participants[1]).toMatchObject({ userId: b1.userId, state: 'joined', installationId: b1.installationId });

    const got = await settleByBarrier(url, g.callId, [[g.a1, 1], [g.a2, 0], [b1, 1], [b2, 2], [c1, 1], [c2, 1]]);
    expect(participant(got[0]![0])).toEqual({ type: 'call.participant', userId: b1.userId, state: 'joined' });
    expect(got[0]![0]).toMatchObject({ revision: joined.revision, installationId: b1.installationId, occurredAtMs: joined.participants[1].joinedAtMs });
    expect(got[3]![1]).toMatchObject({ type: 'call.ended', reason: 'answeredElsewhere', revision: joined.revision });
  });

  it('decline: ends nothing for the others; the decliner’s other installation stops ringing; those in the call are told', async () => {
    const g = await ringingGroup(2);
    const [[b1, b2], [c1, c2]] = g.invitees as [[OnlineDevice, OnlineDevice], [OnlineDevice, OnlineDevice]];
    ok(await answer(b1, g.callId));
    const declined = ok(await end(c1, g.callId, 'localHangup'));
    expect(declined.state).toBe('accepted');
    expect(states(declined)[c1.userId]).toBe('declined');
    const got = await settleByBarrier(url, g.callId, [[g.a1, 2], [b1, 2], [b2, 2], [c1, 1], [c2, 2]]);
    expect(participant(got[0]![1])).toEqual({ type: 'call.participant', userId: c1.userId, state: 'declined' });
    expect(participant(got[1]![1])).toEqual({ type: 'call.participant', userId: c1.userId, state: 'declined' });
    expect(got[4]![1]).toMatchObject({ type: 'call.ended', reason: 'declined', revision: declined.revision });
  });

  it('leave: the others are told who left; with fewer than two in the call it ends, and members still ringing stop', async () => {
    const g = await ringingGroup(2);
    const [[b1, b2], [c1, c2]] = g.invitees as [[OnlineDevice, OnlineDevice], [OnlineDevice, OnlineDevice]];
    ok(await answer(b1, g.callId));
    // Another installation of a member in the call changes nothing.
    expect(states(ok(await end(b2, g.callId, 'localHangup')))[b1.userId]).toBe('joined');
    const left = ok(await end(b1, g.callId, 'localHangup'));
    expect(left.state).toBe('ended');
    expect(left.endReason).toBe('remoteEnded');
    expect(states(left)).toEqual({ [g.a1.userId]: 'left', [b1.userId]: 'left', [c1.userId]: 'missed' });
    const got = await settleByBarrier(url, g.callId, [[g.a1, 3], [g.a2, 0], [b1, 1], [b2, 2], [c1, 2], [c2, 2]]);
    expect(got[0]!.map((e) => [e.type, e.userId ?? e.reason])).toEqual([
      ['call.participant', b1.userId],
      ['call.participant', b1.userId],
      ['call.ended', 'remoteEnded'],
    ]);
    expect(got[0]![1]!.state).toBe('left');
    for (const i of [4, 5]) expect(got[i]![1]).toMatchObject({ type: 'call.ended', reason: 'remoteEnded', revision: left.revision });
  });

  it('cancel: the caller’s end before anyone joined stops every member ringing, with callerCancelled', async () => {
    const g = await ringingGroup(2);
    const cancelled = ok(await end(g.a1, g.callId, 'localHangup'));
    expect(cancelled).toMatchObject({ state: 'ended', endReason: 'localHangup' });
    const got = await settleByBarrier(url, g.callId, [[g.a1, 0], [g.a2, 0], ...g.invitees.flat().map((d): [OnlineDevice, number] => [d, 2])]);
    for (const events of got.slice(2)) expect(events[1]).toMatchObject({ type: 'call.ended', reason: 'callerCancelled', revision: cancelled.revision });
  });

  it('when every invitee declined, the call ends as declined for the caller', async () => {
    const g = await ringingGroup(2);
    const [[b1, b2], [c1, c2]] = g.invitees as [[OnlineDevice, OnlineDevice], [OnlineDevice, OnlineDevice]];
    ok(await end(b1, g.callId, 'localHangup'));
    const last = ok(await end(c2, g.callId, 'declined'));
    expect(last).toMatchObject({ state: 'ended', endReason: 'declined' });
    const got = await settleByBarrier(url, g.callId, [[g.a1, 3], [g.a2, 0], [b1, 1], [b2, 2], [c1, 2], [c2, 1]]);
    expect(got[0]!.map((e) => [e.type, e.userId ?? e.reason])).toEqual([
      ['call.participant', b1.userId],
      ['call.participant', c1.userId],
      ['call.ended', 'declined'],
    ]);
    expect(got[0]![2]!.revision).toBe(last.revision);
  });

  it('the caller ends the call for everyone with forAll; without it the caller leaves', async () => {
    const g = await ringingGroup(3);
    const [b1, c1, d1] = g.invitees.map(([d]) => d) as [OnlineDevice, OnlineDevice, OnlineDevice];
    ok(await answer(b1, g.callId));
    ok(await answer(c1, g.callId));
    const left = ok(await g.a1.api.post(`/v1/calls/${g.callId}/end`, { operationId: uid('op'), reason: 'localHangup' }));
    expect(left.state).toBe('accepted');
    expect(states(left)[g.a1.userId]).toBe('left');
    // The caller may come back, and then end it for everyone.
    ok(await answer(g.a1, g.callId));
    const ended = ok(await g.a1.api.post(`/v1/calls/${g.callId}/end`, { operationId: uid('op'), reason: 'localHangup', forAll: true }));
    expect(ended.state).toBe('ended');
    const got = await settleByBarrier(url, g.callId, [[b1, 5], [c1, 4], [d1, 2]]);
    expect(got[0]!.at(-1)).toMatchObject({ type: 'call.ended', reason: 'remoteEnded', revision: ended.revision });
    expect(got[2]![1]).toMatchObject({ type: 'call.ended', reason: 'remoteEnded' });
  });

  it('invite: a participant rings more members into the live call, up to the cap; a member not in the call may not', async () => {
    const g = await ringingGroup(2);
    const [[b1], [c1, c2]] = g.invitees as [[OnlineDevice, OnlineDevice], [OnlineDevice, OnlineDevice]];
    const [e1, e2] = sockets.add(await online(user(url, 2), url)) as [OnlineDevice, OnlineDevice];
    expectProblem(await c1.api.post(`/v1/calls/${g.callId}/invite`, { operationId: uid('op'), userIds: [e1.userId] }), 'forbidden', /participant/);
    ok(await answer(b1, g.callId));
    const invited = ok(await b1.api.post(`/v1/calls/${g.callId}/invite`, { operationId: uid('op'), userIds: [e1.userId] }));
    expect(states(invited)[e1.userId]).toBe('invited');
    expectProblem(await b1.api.post(`/v1/calls/${g.callId}/invite`, { operationId: uid('op'), userIds: ['x1', 'x2'] }), 'group_call_full', /GROUP_CALL_MAX_MEMBERS/);
    expectProblem(await b1.api.post(`/v1/calls/${g.callId}/invite`, { operationId: uid('op'), userIds: [b1.userId] }), 'invalid_request', /yourself/);
    const got = await settleByBarrier(url, g.callId, [[g.a1, 2], [b1, 2], [c1, 1], [c2, 1], [e1, 1], [e2, 1]]);
    expect(got[4]![0]).toMatchObject({ type: 'call.invited', callId: g.callId, revision: invited.revision, displayName: 'Alice Caller' });
    expect(participant(got[0]![1])).toEqual({ type: 'call.participant', userId: e1.userId, state: 'invited' });
    expect(participant(got[1]![1])).toEqual({ type: 'call.participant', userId: e1.userId, state: 'invited' });
    // A member who declined may still join while the call lives.
    ok(await end(c1, g.callId, 'localHangup'));
    expect(states(ok(await answer(c2, g.callId)))[c1.userId]).toBe('joined');
  });

  it('a request the kind of call does not take is refused (400) and changes nothing: an invite into a one-to-one call, an in-call message in a group call', async () => {
    const g = await ringingGroup(1);
    const [[b1]] = g.invitees as [[OnlineDevice, OnlineDevice]];
    ok(await answer(b1, g.callId));
    const groupBefore = (await getCall(g.a1, g.callId)).json.revision;
    expectProblem(await g.a1.api.post(`/v1/calls/${g.callId}/messages`, { operationId: uid('op'), payload: { t: 'hi' } }), 'invalid_request', /one-to-one calls/);
    expect((await getCall(g.a1, g.callId)).json.revision).toBe(groupBefore);

    // Two others in a one-to-one call (those of the group call are busy in it).
    const p = await people(1);
    const [[q1, q2]] = p.invitees as [[OnlineDevice, OnlineDevice]];
    const pair = await createCall(p.a1, q1.userId);
    ok(await answer(q1, pair.callId));
    const pairBefore = (await getCall(p.a1, pair.callId)).json;
    // From each party, in the call or not: the kind's row comes before who asks.
    for (const d of [p.a1, q1, q2]) {
      expectProblem(await d.api.post(`/v1/calls/${pair.callId}/invite`, { operationId: uid('op'), userIds: [b1.userId] }), 'invalid_request', /one-to-one call/);
    }
    expect((await getCall(p.a1, pair.callId)).json).toEqual(pairBefore);
  });

  it('ringing receipts: the first per member tells the caller (call.ringing) and everyone in the call, the caller too (call.participant), and moves the member to ringing; later ones change nothing', async () => {
    const g = await ringingGroup(2);
    const [[b1, b2], [c1, c2]] = g.invitees as [[OnlineDevice, OnlineDevice], [OnlineDevice, OnlineDevice]];
    ok(await answer(c1, g.callId));
    const first = ok(await b1.api.post(`/v1/calls/${g.callId}/ringing`, { operationId: uid('op'), via: 'socket' }));
    expect(states(first)[b1.userId]).toBe('ringing');
    const again = await b2.ws.command({ type: 'ringing', callId: g.callId, operationId: uid('op'), via: 'apns' });
    expect(again.status).toBe(200);
    expect((again.body as any).revision).toBe(first.revision);
    expectProblem(await g.a1.api.post(`/v1/calls/${g.callId}/ringing`, { operationId: uid('op'), via: 'socket' }), 'forbidden', /invitee/);
    const got = await settleByBarrier(url, g.callId, [[g.a1, 3], [g.a2, 1], [b1, 1], [b2, 1], [c1, 2], [c2, 2]]);
    expect(got[0]![1]).toMatchObject({ type: 'call.ringing', userId: b1.userId, revision: first.revision });
    expect(participant(got[0]![2])).toEqual({ type: 'call.participant', userId: b1.userId, state: 'ringing' });
    expect(got[1]![0]).toMatchObject({ type: 'call.ringing', userId: b1.userId });
    expect(participant(got[4]![1])).toEqual({ type: 'call.participant', userId: b1.userId, state: 'ringing' });
  });

  it('a one-to-one ringing receipt tells the caller’s installations and keeps the revision, so an answer made with the invitation’s still matches', async () => {
    const { a1, a2, invitees } = await people(1);
    const [b1, b2] = invitees[0]!;
    const call = await createCall(a1, b1.userId);
    const receipt = ok(await b2.api.post(`/v1/calls/${call.callId}/ringing`, { operationId: uid('op'), via: 'fcm' }));
    expect(receipt).toEqual(call.snapshot);
    const answered = ok(await answer(b1, call.callId, { expectedRevision: call.snapshot.revision }));
    const got = await settleByBarrier(url, call.callId, [[a1, 2], [a2, 2], [b1, 1], [b2, 2]]);
    for (const events of got.slice(0, 2)) {
      expect(Object.keys(events[0]!).sort()).toEqual(['callId', 'eventId', 'occurredAtMs', 'revision', 'schemaVersion', 'type', 'userId']);
      expect(events[0]).toMatchObject({ type: 'call.ringing', userId: b1.userId, revision: '1' });
      expect(events[1]).toMatchObject({ type: 'call.accepted', revision: answered.revision });
    }
  });

  it('rename: only the caller renames; the members ringing and in the call are told; in-call messages are refused', async () => {
    const g = await ringingGroup(2);
    const [[b1, b2], [c1, c2]] = g.invitees as [[OnlineDevice, OnlineDevice], [OnlineDevice, OnlineDevice]];
    ok(await answer(b1, g.callId));
    expectProblem(await b1.api.post(`/v1/calls/${g.callId}/rename`, { operationId: uid('op'), displayName: 'Bob' }), 'forbidden', /caller/);
    const renamed = ok(await g.a1.api.post(`/v1/calls/${g.callId}/rename`, { operationId: uid('op'), displayName: 'Alice (work)' }));
    expectProblem(await b1.api.post(`/v1/calls/${g.callId}/messages`, { operationId: uid('op'), payload: { x: 1 } }), 'invalid_request', /one-to-one calls/);
    const got = await settleByBarrier(url, g.callId, [[g.a1, 1], [b1, 2], [b2, 2], [c1, 2], [c2, 2]]);
    // b2 stopped ringing when b1 joined: it is told nothing more.
    expect(got[2]!.at(-1)).toMatchObject({ type: 'call.ended', reason: 'answeredElsewhere' });
    for (const i of [1, 3, 4]) expect(got[i]!.at(-1)).toMatchObject({ type: 'call.renamed', displayName: 'Alice (work)', revision: renamed.revision });
  });

  it('members in another accepted call are busy and not rung; with every invitee busy the call is born ended as busy', async () => {
    const [x] = user(url, 1);
    const [y] = user(url, 1);
    const [z] = user(url, 1);
    const [w] = user(url, 1);
    const one = await createCall(x!, y!.userId);
    ok(await answer(y!, one.callId));
    // The busy markers are kept by the relay, a moment behind the answer (CALL_WAITING is off).
    const marker = (u: string) => stack.redis.hget(keys.eventLogMeta({ prefix: 'cb', shards: DEFAULT_CALL_SHARDS }, u), 'active');
    await waitUntil('both busy', async () => (await marker(x!.userId)) === one.callId && (await marker(y!.userId)) === one.callId);
    const group = ok(await z!.api.post('/v1/calls', { callId: randomUUID(), operationId: uid('op'), calleeUserIds: [x!.userId, y!.userId] }), 201);
    expect(group).toMatchObject({ state: 'ended', endReason: 'busy' });
    expect(states(group)).toEqual({ [z!.userId]: 'left', [x!.userId]: 'busy', [y!.userId]: 'busy' });
    const mixed = ok(await z!.api.post('/v1/calls', { callId: randomUUID(), operationId: uid('op'), calleeUserIds: [x!.userId, w!.userId] }), 201);
    expect(states(mixed)).toEqual({ [z!.userId]: 'joined', [x!.userId]: 'busy', [w!.userId]: 'invited' });
  });
});
