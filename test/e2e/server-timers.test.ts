import { describe, expect, it } from 'vitest';
import { ON_CLUSTER, stackForFile } from '../support/stack.js';
import { getCall, uid } from '../support/fixtures.js';
import { TEST_JWT_SECRET, claims, hmacJwt, tokenFor } from '../support/tokens.js';
import { connect, upgradeStatus, UpgradeRejected } from '../support/ws-client.js';
import { within } from '../support/wait.js';
import { Sockets, callEvents, createCall, earlyEvents, endedAt, expectEnded, expectInvited, online, settleByBarrier, user } from './helpers.js';

/**
 * What the server does on its own, without any request: the ring timer ends an unanswered call
 * (docs/protocol.md "States and transitions") and tells both sides; a socket whose session token
 * expires is closed with 4001.
 */

let url: string;
const sockets = Sockets.closedAfterEachTest();

stackForFile({ RING_TIMEOUT_MS: '1000' }, (s) => (url = s.url));

describe('ring timeout', () => {
  it('an unanswered call ends by the server’s timer: every installation of both sides gets unanswered, with no request made', async () => {
    const [a1, a2] = sockets.add(await online(user(url, 2), url)) as [any, any];
    const [b1, b2] = sockets.add(await online(user(url, 2), url)) as [any, any];
    const call = await createCall(a1, b1.userId);
    expect(call.snapshot.expiresAtMs - call.snapshot.createdAtMs).toBe(1000);

    // No request touches the call from here on: only the server's timer can end it.
    const [ea1, ea2, eb1, eb2] = await settleByBarrier(
      url,
      call.callId,
      [
        [a1, 1],
        [a2, 1],
        [b1, 2],
        [b2, 2],
      ],
      10_000,
    );
    expectInvited(eb1![0]!, call);
    const forCaller = ea1![0]!;
    const forCallee = eb1![1]!;
    expect(forCaller.type).toBe('call.ended');
    expect(forCaller.reason).toBe('unanswered');
    expect(forCallee.reason).toBe('unanswered');
    expect(forCaller.occurredAtMs as number).toBeGreaterThanOrEqual(call.snapshot.expiresAtMs as number);
    expect(ea2![0]).toEqual(forCaller);
    expect(eb2![1]).toEqual(forCallee);
    expect(forCaller.eventId).not.toBe(forCallee.eventId);
    // The sweep publishes the end at once too (docs/signaling.md "Early events").
    for (const d of [a1, a2, b1, b2]) expect(earlyEvents(d)).toEqual(ON_CLUSTER ? [] : callEvents(d));

    // The stored call agrees with what was sent.
    const snap = await getCall(a1, call.callId);
    expect(snap.json.state).toBe('ended');
    expect(snap.json.endReason).toBe('unanswered');
    expectEnded(forCaller, 'unanswered', endedAt(snap.json));
    expectEnded(forCallee, 'unanswered', endedAt(snap.json));
  });
});

describe('session token expiry', () => {
  it('a socket whose token expires is closed with 4001, not before the expiry; the expired token is then refused', async () => {
    const id = { userId: uid('user'), installationId: uid('inst') };
    const c = claims(id, 2);
    const token = hmacJwt('HS256', TEST_JWT_SECRET, c);
    const ws = sockets.track(await connect(url, token, { name: 'short-lived' }));
    const expiresAtMs = (c.exp as number) * 1000;

    // Closed within 5 s of the expiry (generous: the sweep runs every second): the wait fails past that.
    const closed = await within(expiresAtMs + 5000 - Date.now(), 'the close within 5 s of the token expiry', ws.closed);
    const closedAt = Date.now();
    expect(closed.code).toBe(4001);
    expect(closedAt).toBeGreaterThanOrEqual(expiresAtMs);

    const again = await upgradeStatus(url, token);
    expect(again).toBeInstanceOf(UpgradeRejected);
    expect((again as UpgradeRejected).status).toBe(401);

    // The device resumes with a fresh token and its last cursor.
    const fresh = sockets.track(await connect(url, tokenFor(id), { cursor: ws.lastCursor!, name: 'fresh' }));
    expect(fresh.frames.map((f) => f.type)).toEqual(['synced']);
  }, 15_000);
});
