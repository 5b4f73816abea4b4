import { describe, expect, it } from 'vitest';
import { ON_CLUSTER, stackForFile } from '../support/stack.js';
import { answer, end } from '../support/fixtures.js';
import {
  Sockets,
  acceptedAt,
  callEvents,
  createCall,
  earlyEvents,
  endedAt,
  expectAccepted,
  expectEnded,
  expectInvited,
  online,
  settleByBarrier,
  user,
  type OnlineDevice,
} from './helpers.js';
import type { EventPayload } from '../support/ws-client.js';
import { api } from '../support/http.js';
import { newServerKey } from '../../src/auth/serverKeys.js';

/**
 * Who receives what (docs/protocol.md "Who receives what"), over real WebSockets: every
 * user has several installations online, and for each transition each installation must get
 * exactly its events (payloads exactly as docs/protocol.md "Events") and nothing else: each check ends
 * with barrier calls (helpers.ts settleByBarrier) that every installation receives after anything
 * the call's changes could have sent it.
 * The ring timeout is in server-timers.test.ts (it needs a short RING_TIMEOUT_MS); ends through
 * the server API are here, sign-out and erasure in server-api.test.ts.
 */

let url: string;
const sockets = Sockets.closedAfterEachTest();

const serverKey = newServerKey();

stackForFile({ SERVER_API_KEYS: serverKey.hash }, (s) => (url = s.url));

/**
 * settleByBarrier, and then, every socket having been online since before the call: on a single
 * Redis each got every event of the call early too, the same in the same order
 * (docs/signaling.md "Early events"); on a cluster none early.
 */
async function settle(after: string, expected: [OnlineDevice, number][]): Promise<EventPayload[][]> {
  const got = await settleByBarrier(url, after, expected);
  for (const [d] of expected) expect(earlyEvents(d), d.installationId).toEqual(ON_CLUSTER ? [] : callEvents(d));
  return got;
}

/** Caller with two installations (the first one places calls), callee with `calleeDevices`. */
async function parties(calleeDevices = 2) {
  const [a1, a2] = sockets.add(await online(user(url, 2, 'Alice Caller'), url));
  const callees = sockets.add(await online(user(url, calleeDevices), url));
  return { a1: a1!, a2: a2!, callees };
}

/** Alice's two installations calling Bob's two, with both of Bob's told of the invitation. */
async function ringing() {
  const { a1, a2, callees } = await parties(2);
  const [b1, b2] = callees as [(typeof callees)[0], (typeof callees)[0]];
  const call = await createCall(a1, b1.userId);
  await Promise.all([b1.ws.waitForEvents(1), b2.ws.waitForEvents(1)]);
  return { a1, a2, b1, b2, call };
}

type Ringing = Awaited<ReturnType<typeof ringing>>;

/** settle over the four installations of ringing(), each having received `counts` events by then; their events by name. */
async function settleRinging({ a1, a2, b1, b2, call }: Ringing, counts: { a1: number; a2: number; b1: number; b2: number }) {
  const [ea1, ea2, eb1, eb2] = await settle(call.callId, [
    [a1, counts.a1],
    [a2, counts.a2],
    [b1, counts.b1],
    [b2, counts.b2],
  ]);
  return { ea1: ea1!, ea2: ea2!, eb1: eb1!, eb2: eb2! };
}

/** ringing(), answered by `winner`, and settled: the caller's installations told of the answer, the other callee installation of answeredElsewhere. */
async function answered(winner: 'b1' | 'b2') {
  const r = await ringing();
  const won = await answer(r[winner], r.call.callId);
  expect(won.status, won.text).toBe(200);
  await settleRinging(r, { a1: 1, a2: 1, b1: winner === 'b1' ? 1 : 2, b2: winner === 'b2' ? 1 : 2 });
  return r;
}

/** `d` ends the call with `reason`, which must end it. */
async function endsIt(d: OnlineDevice, callId: string, reason: string) {
  const res = await end(d, callId, reason);
  expect(res.status, res.text).toBe(200);
  expect(res.json.state).toBe('ended');
  return res;
}

describe('signaling audience per transition', () => {
  it('create: every callee installation gets call.invited; the caller’s installations get nothing', async () => {
    const { a1, a2, callees } = await parties(2);
    const [b1, b2] = callees as [(typeof callees)[0], (typeof callees)[0]];

    const call = await createCall(a1, b1.userId, { video: true });

    const [e1, e2] = await settle(call.callId, [
      [b1, 1],
      [b2, 1],
      [a1, 0],
      [a2, 0],
    ]);
    expectInvited(e1![0]!, call);
    expect(e1![0]!.video).toBe(true);
    expect(e1![0]!.displayName).toBe('Alice Caller');
    expect(e1![0]!.handle).toBe(`app:${encodeURIComponent(a1.userId)}`);
    // The same log entry reaches both installations: same payload, same cursor.
    expect(e2![0]).toEqual(e1![0]);
    expect(b2.ws.eventFrames()[0]!.cursor).toBe(b1.ws.eventFrames()[0]!.cursor);
  });

  it('answer: caller’s installations get call.accepted; the callee’s other installations (also one that got 409) get answeredElsewhere; the winner gets nothing', async () => {
    const { a1, a2, callees } = await parties(3);
    const [b1, b2, b3] = callees as [(typeof callees)[0], (typeof callees)[0], (typeof callees)[0]];
    const call = await createCall(a1, b1.userId);
    await Promise.all([b1, b2, b3].map((b) => b.ws.waitForEvents(1)));

    const won = await answer(b1, call.callId);
    expect(won.status, won.text).toBe(200);
    // b2 tries too and loses: it must still be told to stop ringing (docs/protocol.md "Who receives what").
    const lost = await answer(b2, call.callId);
    expect(lost.status, lost.text).toBe(409);
    expect(lost.json.code).toBe('answer_conflict');

    const [ea1, ea2, eb1, eb2, eb3] = await settle(call.callId, [
      [a1, 1],
      [a2, 1],
      [b1, 1],
      [b2, 2],
      [b3, 2],
    ]);
    expectAccepted(ea1![0]!, won.json);
    expect(ea1![0]!.answeredByInstallationId).toBe(b1.installationId);
    expect(ea2![0]).toEqual(ea1![0]);
    expect(eb1!.map((e) => e.type)).toEqual(['call.invited']);
    for (const events of [eb2!, eb3!]) {
      expectInvited(events[0]!, call);
      expectEnded(events[1]!, 'answeredElsewhere', acceptedAt(won.json));
    }
    expect(eb3![1]).toEqual(eb2![1]);
    // Each audience's event has its own identity.
    expect(ea1![0]!.eventId).not.toBe(eb2![1]!.eventId);
  });

  it('caller cancels before the answer: every callee installation gets callerCancelled; the caller’s installations get nothing', async () => {
    const r = await ringing();

    const cancelled = await endsIt(r.a1, r.call.callId, 'localHangup');

    const { eb1, eb2 } = await settleRinging(r, { a1: 0, a2: 0, b1: 2, b2: 2 });
    expectEnded(eb1[1]!, 'callerCancelled', endedAt(cancelled.json));
    expect(eb2[1]).toEqual(eb1[1]);
  });

  it('callee declines: the caller’s installations and the callee’s other installations get declined; the declining installation gets nothing', async () => {
    const r = await ringing();

    const declined = await endsIt(r.b1, r.call.callId, 'declined');

    const { ea1, ea2, eb1, eb2 } = await settleRinging(r, { a1: 1, a2: 1, b1: 1, b2: 2 });
    expectEnded(ea1[0]!, 'declined', endedAt(declined.json));
    expect(ea2[0]).toEqual(ea1[0]);
    expect(eb1.map((e) => e.type)).toEqual(['call.invited']);
    expectEnded(eb2[1]!, 'declined', endedAt(declined.json));
    expect(eb2[1]!.eventId).not.toBe(ea1[0]!.eventId);
  });

  it('callee’s localHangup while ringing is a decline for everyone else', async () => {
    const r = await ringing();

    const ended = await endsIt(r.b2, r.call.callId, 'localHangup');

    const { ea1, eb1 } = await settleRinging(r, { a1: 1, a2: 1, b1: 2, b2: 1 });
    expectEnded(ea1[0]!, 'declined', endedAt(ended.json));
    expectEnded(eb1[1]!, 'declined', endedAt(ended.json));
  });

  it('caller hangs up after the answer: only the answering installation gets remoteEnded', async () => {
    const r = await answered('b2');

    const hungUp = await endsIt(r.a1, r.call.callId, 'localHangup');

    const { eb2 } = await settleRinging(r, { a1: 1, a2: 1, b1: 2, b2: 2 });
    expectEnded(eb2[1]!, 'remoteEnded', endedAt(hungUp.json));
    // b1 saw only its invitation and answeredElsewhere.
    expect(callEvents(r.b1).map((e) => `${e.type}/${String(e.reason ?? '')}`)).toEqual(['call.invited/', 'call.ended/answeredElsewhere']);
  });

  it('callee hangs up after the answer: the caller’s installations get remoteEnded; no callee installation gets anything', async () => {
    const r = await answered('b1');

    const hungUp = await endsIt(r.b1, r.call.callId, 'localHangup');

    const { ea1, ea2 } = await settleRinging(r, { a1: 2, a2: 2, b1: 1, b2: 2 });
    expectEnded(ea1[1]!, 'remoteEnded', endedAt(hungUp.json));
    expect(ea2[1]).toEqual(ea1[1]);
  });

  it('an end request that changes nothing (echo reason, or a repeat) sends no event', async () => {
    const r = await ringing();

    // An echo of a backend-decided end never changes a call (docs/protocol.md "End reasons").
    const echo = await end(r.b1, r.call.callId, 'answeredElsewhere');
    expect(echo.status, echo.text).toBe(200);
    expect(echo.json.state).toBe('ringing');
    await endsIt(r.a1, r.call.callId, 'localHangup');
    const again = await end(r.a1, r.call.callId, 'localHangup');
    expect(again.status).toBe(200);

    await settleRinging(r, { a1: 0, a2: 0, b1: 2, b2: 2 });
  });

  it('server API end while ringing: every caller and every callee installation gets call.ended with the reason given', async () => {
    const r = await ringing();

    const res = await api(url, serverKey.key).post(`/v1/server/calls/${r.call.callId}/end`, { reason: 'failed' });
    expect(res.status, res.text).toBe(200);

    const { ea1, ea2, eb1, eb2 } = await settleRinging(r, { a1: 1, a2: 1, b1: 2, b2: 2 });
    expectEnded(ea1[0]!, 'failed', endedAt(res.json.call));
    expect(ea2[0]).toEqual(ea1[0]);
    expectEnded(eb1[1]!, 'failed', endedAt(res.json.call));
    expect(eb2[1]).toEqual(eb1[1]);
  });

  it('server API end after the answer: every caller installation and the answering installation get call.ended remoteEnded; the callee’s other installations nothing', async () => {
    const r = await answered('b1');

    const res = await api(url, serverKey.key).post(`/v1/server/calls/${r.call.callId}/end`);
    expect(res.status, res.text).toBe(200);

    const { ea1, ea2, eb1 } = await settleRinging(r, { a1: 2, a2: 2, b1: 2, b2: 2 });
    expectEnded(ea1[1]!, 'remoteEnded', endedAt(res.json.call));
    expect(ea2[1]).toEqual(ea1[1]);
    expectEnded(eb1[1]!, 'remoteEnded', endedAt(res.json.call));
    expect(callEvents(r.b2).map((e) => `${e.type}/${String(e.reason ?? '')}`)).toEqual(['call.invited/', 'call.ended/answeredElsewhere']);
  });
});
