import WebSocket from 'ws';
import { describe, expect, it } from 'vitest';
import { SignalingClient, type LiveSignal, type SignalRefusal } from '@calling-backend/client';
import { stackForFile } from '../support/stack.js';
import { answer, end, getCall, uid } from '../support/fixtures.js';
import type { Frame } from '../support/ws-client.js';
import { Sockets, createCall, online, user, waitUntil, type OnlineDevice } from './helpers.js';
import { CLOSE } from '../../src/contracts/signaling.js';

/**
 * Live in-call signals (docs/signaling.md "Live signals") over real sockets on two server
 * processes on one Redis (or one Redis Cluster): sent by a joined member to the other joined
 * members only, not stored, in order per sender, deduplicated per state, limited per socket
 * (close 4029) and per call (an error frame, the signal dropped).
 */

const PER_CALL_PER_S = 40;
let urlA: string;
let urlB: string;
const sockets = Sockets.closedAfterEachTest();

const ENV = { GROUP_CALL_MAX_MEMBERS: '4', RATE_CALL_SIGNALS_PER_S: String(PER_CALL_PER_S), RATE_WS_MESSAGES_PER_10S: '50' };

stackForFile(ENV, async (s) => {
  urlA = s.url;
  urlB = (await s.addServer(ENV)).url;
});

interface Signal {
  callId: string;
  userId: string;
  kind: string;
  value: unknown;
  atMs: number;
}

const signals = (d: OnlineDevice): Signal[] => d.ws.frames.filter((f: Frame) => f.type === 'signal').map((f) => f.signal as Signal);
const refusals = (d: OnlineDevice): Frame[] => d.ws.frames.filter((f: Frame) => f.type === 'error' && f.code === 'signal_refused');

function signal(d: OnlineDevice, callId: string, kind: string, value: unknown): void {
  d.ws.send({ type: 'signal', callId, kind, value });
}

/**
 * A group call of Alice (a1 joined, a2 her other installation), Bob (b1, on the other process,
 * joined) and Carol (c1 joined), and Dan (d1, invited, still ringing).
 */
async function groupInCall() {
  const [a1, a2] = sockets.add(await online(user(urlA, 2, 'Alice'), urlA)) as [OnlineDevice, OnlineDevice];
  const [b1] = sockets.add(await online(user(urlB, 1, 'Bob'), urlB)) as [OnlineDevice];
  const [c1] = sockets.add(await online(user(urlA, 1, 'Carol'), urlA)) as [OnlineDevice];
  const [d1] = sockets.add(await online(user(urlB, 1, 'Dan'), urlB)) as [OnlineDevice];
  const call = await createCall(a1, '', { calleeUserId: undefined, calleeUserIds: [b1.userId, c1.userId, d1.userId] });
  for (const d of [b1, c1]) {
    const r = await answer(d, call.callId);
    expect(r.status, r.text).toBe(200);
  }
  return { a1, a2, b1, c1, d1, callId: call.callId };
}

describe('live signals', () => {
  it('reach the other joined members on both processes, in order per sender, and nobody else; nothing is logged', async () => {
    const g = await groupInCall();
    signal(g.a1, g.callId, 'muted', true);
    for (let i = 1; i <= 20; i++) signal(g.a1, g.callId, 'reaction', `r${i}`);
    signal(g.a1, g.callId, 'custom', { slide: 3, note: 'é✓' });
    signal(g.b1, g.callId, 'handRaised', true);
    await waitUntil('22 signals from Alice and one from Bob', () => signals(g.b1).length === 22 && signals(g.c1).length === 23 && signals(g.a1).length === 1);
    for (const d of [g.b1, g.c1]) {
      const fromAlice = signals(d).filter((s) => s.userId === g.a1.userId);
      expect(fromAlice.map((s) => s.kind)).toEqual(['muted', ...Array(20).fill('reaction'), 'custom']);
      expect(fromAlice.slice(1, 21).map((s) => s.value)).toEqual(Array.from({ length: 20 }, (_, i) => `r${i + 1}`));
      expect(fromAlice[0]).toEqual({ callId: g.callId, userId: g.a1.userId, kind: 'muted', value: true, atMs: expect.any(Number) });
      expect(fromAlice[21]!.value).toEqual({ slide: 3, note: 'é✓' });
    }
    expect(signals(g.a1)).toEqual([expect.objectContaining({ userId: g.b1.userId, kind: 'handRaised', value: true })]);
    // Not the sender's other installation, not a member still ringing, and no log event at all.
    expect(signals(g.a2)).toEqual([]);
    expect(signals(g.d1)).toEqual([]);
    for (const d of [g.a1, g.a2, g.b1, g.c1, g.d1]) expect(d.ws.events().filter((e) => e.type === 'signal' || 'kind' in e)).toEqual([]);
    expect(refusals(g.a1)).toEqual([]);
  });

  it('a stranger, a member still ringing, and the joined member’s other installation cannot send; an unknown call is refused', async () => {
    const g = await groupInCall();
    const [s1] = sockets.add(await online(user(urlA, 1, 'Stranger'), urlA)) as [OnlineDevice];
    expect((await getCall(g.a1, g.callId)).json.presence, 'no state sent yet').toBeUndefined();
    signal(s1, g.callId, 'muted', true);
    signal(g.d1, g.callId, 'muted', true);
    signal(g.a2, g.callId, 'reaction', 'x');
    signal(s1, uid('nocall'), 'muted', true);
    await waitUntil('four refusals', () => refusals(s1).length === 2 && refusals(g.d1).length === 1 && refusals(g.a2).length === 1);
    // Two calls, two slots on a cluster: the refusals may come in either order.
    expect(refusals(s1).map((f) => f.reason).sort()).toEqual(['not_found', 'not_joined']);
    expect(refusals(g.d1)[0]).toMatchObject({ reason: 'not_joined', callId: g.callId });
    expect(refusals(g.a2)[0]).toMatchObject({ reason: 'not_joined', callId: g.callId });
    // A barrier from a joined member: the refused ones, sent before, reached nobody.
    signal(g.c1, g.callId, 'speaking', true);
    await waitUntil('the barrier', () => signals(g.a1).length === 1 && signals(g.b1).length === 1);
    for (const d of [g.a1, g.b1]) expect(signals(d).map((s) => s.userId)).toEqual([g.c1.userId]);
    // Dan, refused while ringing, answers: from his next signal on he sends and receives (the
    // call's signal view, made while he rang, is made again: lua/includes/presence.lua).
    expect((await answer(g.d1, g.callId)).status).toBe(200);
    signal(g.c1, g.callId, 'speaking', false);
    signal(g.d1, g.callId, 'handRaised', true);
    await waitUntil('Carol at Dan, Dan at Alice', () => signals(g.d1).length === 1 && signals(g.a1).length === 3);
    expect(signals(g.d1)[0]).toMatchObject({ userId: g.c1.userId, kind: 'speaking', value: false });
    expect(signals(g.a1)).toContainEqual(expect.objectContaining({ userId: g.d1.userId, kind: 'handRaised', value: true }));
    // A malformed signal is a bad_message, and the socket stays open.
    g.a1.ws.send({ type: 'signal', callId: g.callId, kind: 'muted', value: 'yes' });
    g.a1.ws.send({ type: 'signal', callId: g.callId, kind: 'custom', value: { blob: 'x'.repeat(2000) } });
    await g.a1.ws.until(() => g.a1.ws.frames.filter((f) => f.type === 'error' && f.code === 'bad_message').length === 2, 3000, 'two bad_message');
    expect(g.a1.ws.closeInfo).toBeUndefined();
  });

  it('a state already kept is not sent again; a member who leaves stops receiving, and their state is cleared for everyone', async () => {
    const g = await groupInCall();
    signal(g.c1, g.callId, 'handRaised', true);
    await waitUntil('Carol’s hand at Alice and Bob', () => signals(g.a1).length === 1 && signals(g.b1).length === 1);
    signal(g.a1, g.callId, 'muted', true);
    signal(g.a1, g.callId, 'muted', true);
    signal(g.a1, g.callId, 'muted', false);
    signal(g.a1, g.callId, 'muted', false);
    signal(g.a1, g.callId, 'video', false);
    await waitUntil('three changes', () => signals(g.b1).length === 4 && signals(g.c1).length === 3);
    expect(signals(g.c1).map((s) => [s.kind, s.value])).toEqual([['muted', true], ['muted', false], ['video', false]]);
    for (const d of [g.a1, g.b1]) {
      expect((await getCall(d, g.callId)).json.presence).toEqual({ [g.a1.userId]: { muted: false, video: false }, [g.c1.userId]: { handRaised: true } });
    }

    const left = await end(g.c1, g.callId, 'localHangup');
    expect(left.status, left.text).toBe(200);
    signal(g.c1, g.callId, 'muted', true);
    await waitUntil('Carol refused', () => refusals(g.c1).length === 1);
    signal(g.a1, g.callId, 'reaction', 'bye');
    await waitUntil('the reaction at Bob', () => signals(g.b1).length === 5);
    expect(signals(g.c1)).toHaveLength(3);
    for (const d of [g.a1, g.b1]) expect((await getCall(d, g.callId)).json.presence, 'Carol’s state is gone').toEqual({ [g.a1.userId]: { muted: false, video: false } });

    // The call's end clears everything.
    for (const d of [g.a1, g.b1]) expect((await end(d, g.callId, 'localHangup')).status).toBe(200);
    const ended = await getCall(g.a1, g.callId);
    expect(ended.json.state).toBe('ended');
    expect(ended.json.presence).toBeUndefined();
  });

  it('a member who joins after signals were sent gets the next ones and may send', async () => {
    const g = await groupInCall();
    signal(g.a1, g.callId, 'reaction', 'before');
    await waitUntil('the first reaction at Bob and Carol', () => signals(g.b1).length === 1 && signals(g.c1).length === 1);
    signal(g.d1, g.callId, 'reaction', 'ringing');
    await waitUntil('Dan refused while ringing', () => refusals(g.d1).length === 1);
    const joined = await answer(g.d1, g.callId);
    expect(joined.status, joined.text).toBe(200);
    signal(g.a1, g.callId, 'reaction', 'after');
    signal(g.d1, g.callId, 'reaction', 'joined');
    // Order holds per sender only: Alice's second reaction and Dan's reach Bob and Carol in either order.
    const aliceAt = (d: OnlineDevice) => signals(d).filter((s) => s.userId === g.a1.userId).length;
    await waitUntil(
      'Alice’s second reaction everywhere, and Dan’s at the others',
      () => signals(g.d1).length === 1 && [g.b1, g.c1].every((d) => aliceAt(d) === 2) && [g.a1, g.b1, g.c1].every((d) => signals(d).some((s) => s.userId === g.d1.userId)),
    );
    expect(signals(g.d1).map((s) => [s.userId, s.value])).toEqual([[g.a1.userId, 'after']]);
    for (const d of [g.b1, g.c1]) expect(signals(d).filter((s) => s.userId === g.a1.userId).map((s) => s.value)).toEqual(['before', 'after']);
    for (const d of [g.a1, g.b1, g.c1]) expect(signals(d).filter((s) => s.userId === g.d1.userId).map((s) => s.value)).toEqual(['joined']);
    expect(refusals(g.d1)).toHaveLength(1);
  });

  it('a flood is cut: past the call’s limit each signal is refused with rate_limited; past the socket’s limit the socket is closed with 4029', async () => {
    const g = await groupInCall();
    const n = 45;
    for (let i = 0; i < n; i++) signal(g.a1, g.callId, 'reaction', `f${i}`);
    await waitUntil('every flood signal delivered or refused', () => signals(g.b1).length + refusals(g.a1).length === n && signals(g.c1).length === signals(g.b1).length);
    // A burst spans at most two of the call's one-second windows.
    expect(signals(g.b1).length).toBeLessThanOrEqual(2 * PER_CALL_PER_S);
    expect(signals(g.b1).length).toBeGreaterThanOrEqual(Math.min(n, PER_CALL_PER_S));
    expect(refusals(g.a1).length).toBeGreaterThan(0);
    expect(refusals(g.a1)[0]).toMatchObject({ reason: 'rate_limited', callId: g.callId, retryAfterMs: expect.any(Number) });

    // RATE_WS_MESSAGES_PER_10S (50 here and by default, refilled over 10 s) counts signal frames like
    // every client frame.
    for (let i = 0; i < 60; i++) signal(g.a1, g.callId, 'speaking', i % 2 === 0);
    const closed = await g.a1.ws.closed;
    expect(closed.code).toBe(CLOSE.rateLimited);
  });

  it('a reconnecting device gets the current state from the call and no old signals', async () => {
    const g = await groupInCall();
    signal(g.a1, g.callId, 'handRaised', true);
    await waitUntil('at Bob', () => signals(g.b1).length === 1);
    const cursor = g.b1.ws.lastCursor;
    await g.b1.ws.close();
    const [again] = sockets.add(await online([g.b1], urlA, { cursor })) as [OnlineDevice];
    signal(g.c1, g.callId, 'reaction', 'hi');
    await waitUntil('the new signal', () => signals(again).length === 1);
    expect(signals(again)).toEqual([expect.objectContaining({ userId: g.c1.userId, kind: 'reaction', value: 'hi' })]);
    const snapshot = await getCall(again, g.callId);
    expect(snapshot.status).toBe(200);
    expect(snapshot.json.presence).toEqual({ [g.a1.userId]: { handRaised: true } });
  });

  it('the client package sends with signal() and hands on received signals (MessagePack) and refusals', async () => {
    const g = await groupInCall();
    const got: LiveSignal[] = [];
    const refused: SignalRefusal[] = [];
    const client = new SignalingClient({
      url: urlA.replace(/^http/, 'ws'),
      token: g.a1.token,
      WebSocket,
      // MessagePack here, JSON on the raw sockets on the same process: one signal's frame in both
      // encodings from one notice.
      encoding: 'msgpack',
      onEvent: () => {},
      onSignal: (sig) => got.push(sig),
      onSignalRefused: (r) => refused.push(r),
    });
    try {
      await client.start();
      expect(client.signal(g.callId, { kind: 'handRaised', value: true })).toBe(true);
      expect(client.signal(uid('nocall'), { kind: 'reaction', value: '👍' })).toBe(true);
      await waitUntil('Alice’s hand at Bob and Carol', () => signals(g.b1).length === 1 && signals(g.c1).length === 1);
      expect(signals(g.b1)[0]).toMatchObject({ userId: g.a1.userId, kind: 'handRaised', value: true });
      signal(g.b1, g.callId, 'muted', true);
      await waitUntil('Bob’s mute and the refusal at the client', () => got.length === 1 && refused.length === 1);
      expect(got[0]).toEqual({ callId: g.callId, userId: g.b1.userId, kind: 'muted', value: true, atMs: expect.any(Number) });
      // Carol has Alice's hand, then Bob's mute; Alice's JSON socket, Bob's mute.
      await waitUntil('Bob’s mute on the JSON sockets too', () => signals(g.c1).length === 2 && signals(g.a1).length === 1);
      for (const d of [g.a1, g.c1]) expect(signals(d).at(-1)).toEqual(got[0]);
      expect(refused[0]).toMatchObject({ reason: 'not_found', detail: expect.any(String) });
    } finally {
      client.stop();
    }
  });

  it('a one-to-one call: the two installations in it, once answered; not while it rings, not the callee’s other installation', async () => {
    const [a1] = sockets.add(await online(user(urlA, 1, 'Alice'), urlA)) as [OnlineDevice];
    const [b1, b2] = sockets.add(await online(user(urlB, 2, 'Bob'), urlB)) as [OnlineDevice, OnlineDevice];
    const call = await createCall(a1, b1.userId);
    signal(b1, call.callId, 'muted', true);
    await waitUntil('refused while ringing', () => refusals(b1).length === 1);
    expect((await answer(b1, call.callId)).status).toBe(200);
    signal(a1, call.callId, 'video', false);
    signal(b1, call.callId, 'muted', true);
    signal(b2, call.callId, 'muted', true);
    await waitUntil('each side has the other’s', () => signals(b1).length === 1 && signals(a1).length === 1 && refusals(b2).length === 1);
    expect(signals(b1)[0]).toMatchObject({ userId: a1.userId, kind: 'video', value: false });
    expect(signals(a1)[0]).toMatchObject({ userId: b1.userId, kind: 'muted', value: true });
    expect(signals(b2)).toEqual([]);
    expect((await getCall(a1, call.callId)).json.presence).toEqual({ [a1.userId]: { video: false }, [b1.userId]: { muted: true } });
  });
});
