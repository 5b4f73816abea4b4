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
type Who = 'a1' | 'a2' | 'b1' | 'b2';
const EVERYONE: Who[] = ['a1', 'a2', 'b1', 'b2'];

/** settle over the four installations of ringing(), each having received `count(it)` events by then; their events by name. */
async function settleRinging(r: Ringing, count: (w: Who) => number): Promise<Record<Who, EventPayload[]>> {
  const events = await settle(
    r.call.callId,
    EVERYONE.map((w) => [r[w], count(w)]),
  );
  return Object.fromEntries(EVERYONE.map((w, i) => [w, events[i]!])) as Record<Who, EventPayload[]>;
}

/** ringing(), answered by `winner`, and settled: the caller's installations told of the answer, the other callee installation of answeredElsewhere. */
async function answered(winner: 'b1' | 'b2') {
  const r = await ringing();
  const won = await answer(r[winner], r.call.callId);
  expect(won.status, won.text).toBe(200);
  const other = winner === 'b1' ? 'b2' : 'b1';
  const events = await settleRinging(r, (w) => (w === other ? 2 : 1));
  expect(events[other].map((e) => `${e.type}/${String(e.reason ?? '')}`)).toEqual(['call.invited/', 'call.ended/answeredElsewhere']);
  return r;
}

/** `d` ends the call with `reason`, which must end it. */
async function endsIt(d: OnlineDevice, callId: string, reason: string) {
  const res = await end(d, callId, reason);
  expect(res.status, res.text).toBe(200);
  expect(res.json.state).toBe('ended');
  return res;
}

/**
 * An end of the call ringing() places, Alice's a1 calling Bob's b1 and b2 (answered first by
 * `answeredBy`, if given): `ender` ends it with `reported` (`server`: the server API, with
 * `reported` as the reason if given), and then each installation in `told` gets call.ended with
 * that reason, one event per user (the same at each of its installations), and nobody anything else.
 */
interface EndCase {
  title: string;
  answeredBy?: 'b1' | 'b2';
  ender: Who | 'server';
  reported?: string;
  told: Partial<Record<Who, string>>;
}

const ENDS: EndCase[] = [
  {
    title: 'caller cancels before the answer: every callee installation gets callerCancelled; the caller’s installations get nothing',
    ender: 'a1',
    reported: 'localHangup',
    told: { b1: 'callerCancelled', b2: 'callerCancelled' },
  },
  {
    title: 'callee declines: the caller’s installations and the callee’s other installations get declined; the declining installation gets nothing',
    ender: 'b1',
    reported: 'declined',
    told: { a1: 'declined', a2: 'declined', b2: 'declined' },
  },
  {
    title: 'callee’s localHangup while ringing is a decline for everyone else',
    ender: 'b2',
    reported: 'localHangup',
    told: { a1: 'declined', a2: 'declined', b1: 'declined' },
  },
  {
    title: 'caller hangs up after the answer: only the answering installation gets remoteEnded',
    answeredBy: 'b2',
    ender: 'a1',
    reported: 'localHangup',
    told: { b2: 'remoteEnded' },
  },
  {
    title: 'callee hangs up after the answer: the caller’s installations get remoteEnded; no callee installation gets anything',
    answeredBy: 'b1',
    ender: 'b1',
    reported: 'localHangup',
    told: { a1: 'remoteEnded', a2: 'remoteEnded' },
  },
  {
    title: 'server API end while ringing: every caller and every callee installation gets call.ended with the reason given',
    ender: 'server',
    reported: 'failed',
    told: { a1: 'failed', a2: 'failed', b1: 'failed', b2: 'failed' },
  },
  {
    title: 'server API end after the answer: every caller installation and the answering installation get call.ended remoteEnded; the callee’s other installations nothing',
    answeredBy: 'b1',
    ender: 'server',
    told: { a1: 'remoteEnded', a2: 'remoteEnded', b1: 'remoteEnded' },
  },
];

/** The call's snapshot after `ender` ended it with `reported`. */
async function endAs(r: Ringing, ender: EndCase['ender'], reported: string | undefined): Promise<Record<string, any>> {
  if (ender !== 'server') return (await endsIt(r[ender], r.call.callId, reported!)).json;
  const res = await api(url, serverKey.key).post(`/v1/server/calls/${r.call.callId}/end`, reported ? { reason: reported } : undefined);
  expect(res.status, res.text).toBe(200);
  return res.json.call;
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

  for (const { title, answeredBy, ender, reported, told } of ENDS) {
    it(title, async () => {
      const r = answeredBy ? await answered(answeredBy) : await ringing();

      const snapshot = await endAs(r, ender, reported);

      // Before the end each callee installation had its invitation; after an answer, the caller's
      // installations call.accepted too, and the callee's other one answeredElsewhere.
      const before = (w: Who) => (w.startsWith('a') ? (answeredBy ? 1 : 0) : answeredBy && answeredBy !== w ? 2 : 1);
      const events = await settleRinging(r, (w) => before(w) + (told[w] ? 1 : 0));
      const lastOf = (user: 'a' | 'b') => EVERYONE.filter((w) => w.startsWith(user) && told[w]).map((w) => events[w].at(-1)!);
      for (const w of EVERYONE) if (told[w]) expectEnded(events[w].at(-1)!, told[w], endedAt(snapshot));
      for (const copies of [lastOf('a'), lastOf('b')]) for (const e of copies) expect(e).toEqual(copies[0]);
      // Each audience's event has its own identity.
      if (lastOf('a').length > 0 && lastOf('b').length > 0) expect(lastOf('a')[0]!.eventId).not.toBe(lastOf('b')[0]!.eventId);
    });
  }

  it('an end request that changes nothing (echo reason, or a repeat) sends no event', async () => {
    const r = await ringing();

    // An echo of a backend-decided end never changes a call (docs/protocol.md "End reasons").
    const echo = await end(r.b1, r.call.callId, 'answeredElsewhere');
    expect(echo.status, echo.text).toBe(200);
    expect(echo.json.state).toBe('ringing');
    await endsIt(r.a1, r.call.callId, 'localHangup');
    const again = await end(r.a1, r.call.callId, 'localHangup');
    expect(again.status).toBe(200);

    await settleRinging(r, (w) => (w.startsWith('a') ? 0 : 2));
  });
});
