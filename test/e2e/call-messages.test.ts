import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { stackForFile, type Stack } from '../support/stack.js';
import { answer, end, expectProblem, uid, type Device } from '../support/fixtures.js';
import { connect, type Frame } from '../support/ws-client.js';
import { shardOf } from '../../src/redis/keys.js';
import { MESSAGE_PAYLOAD_MAX_BYTES } from '../../src/config/messageLimits.js';
import { Sockets, createCall, online, readAllEvents, user, waitUntil, type OnlineDevice } from './helpers.js';

/**
 * In-call messages (docs/api.md "In-call messages"): POST /v1/calls/{id}/messages delivered as
 * `call.message` frames to the other party's installation in the call only, in order per sender,
 * idempotent by operationId, refused outside a ringing or accepted call, recoverable by
 * GET /v1/calls/{id}/messages, and never in (or pushing anything out of) the users' event logs.
 */

const SHARDS = 8;
let url: string;
const sockets = Sockets.closedAfterEachTest();

stackForFile({ CALL_SHARDS: String(SHARDS) }, (s) => (url = s.url));

interface MessageEvent {
  schemaVersion: number;
  eventId: string;
  type: string;
  callId: string;
  occurredAtMs: number;
  fromInstallationId: string;
  seq: number;
  payload: Record<string, unknown>;
}

function messages(d: OnlineDevice): MessageEvent[] {
  return d.ws.frames.filter((f: Frame) => f.type === 'message').map((f) => f.event as MessageEvent);
}

function send(d: Device, callId: string, payload: unknown, operationId = uid('op')) {
  return d.api.post(`/v1/calls/${callId}/messages`, { operationId, payload });
}

/** A callId in the same shard as `callId`: its changes are relayed after that call's, in outbox order. */
function sameShardCallId(callId: string): string {
  for (;;) {
    const id = randomUUID();
    if (shardOf(id, SHARDS) === shardOf(callId, SHARDS)) return id;
  }
}

async function parties() {
  const [a1, a2] = sockets.add(await online(user(url, 2, 'Alice'), url));
  const [b1, b2] = sockets.add(await online(user(url, 2, 'Bob'), url));
  return { a1: a1!, a2: a2!, b1: b1!, b2: b2! };
}

describe('in-call messages', () => {
  it('reach every ringing callee installation before the answer, then only the installation in the call, payload unchanged', async () => {
    const { a1, a2, b1, b2 } = await parties();
    const call = await createCall(a1, b1.userId);
    const offer = { sdp: 'v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\n', kind: 'offer', n: [1, 2.5, -3e-7], nested: { ok: true, none: null, s: 'é✓' } };

    const m1 = await send(a1, call.callId, offer);
    expect(m1.status, m1.text).toBe(200);
    expect(m1.json).toMatchObject({ callId: call.callId, seq: 1 });
    await waitUntil('the early offer on both ringing callee installations', () => messages(b1).length === 1 && messages(b2).length === 1);
    const early = messages(b1)[0]!;
    expect(Object.keys(early).sort()).toEqual(['callId', 'eventId', 'fromInstallationId', 'occurredAtMs', 'payload', 'schemaVersion', 'seq', 'type']);
    expect(early).toEqual({
      schemaVersion: 1,
      eventId: m1.json.eventId,
      type: 'call.message',
      callId: call.callId,
      occurredAtMs: m1.json.occurredAtMs,
      fromInstallationId: a1.installationId,
      seq: 1,
      payload: offer,
    });
    expect(messages(b2)[0]).toEqual(early);

    const won = await answer(b1, call.callId);
    expect(won.status, won.text).toBe(200);
    const m2 = await send(a1, call.callId, { kind: 'candidate', candidate: 'candidate:1 1 udp 1 127.0.0.1 5000 typ host' });
    expect(m2.json.seq).toBe(2);
    const m3 = await send(b1, call.callId, { kind: 'answer', sdp: 'v=0' });
    expect(m3.status, m3.text).toBe(200);
    expect(m3.json.seq).toBe(1);
    await waitUntil('m2 at the answering installation', () => messages(b1).length === 2);
    await waitUntil('m3 at the calling installation', () => messages(a1).length === 1);
    expect(messages(b1)[1]).toMatchObject({ seq: 2, fromInstallationId: a1.installationId, payload: { kind: 'candidate' } });
    expect(messages(a1)[0]).toMatchObject({ seq: 1, fromInstallationId: b1.installationId, payload: { kind: 'answer', sdp: 'v=0' } });

    // Barriers relayed after the messages: b1 hangs up (every caller installation is told), then
    // a call in the same shard rings b's installations. Whatever else was to arrive has arrived.
    const ended = await end(b1, call.callId, 'localHangup');
    expect(ended.status, ended.text).toBe(200);
    await waitUntil('remoteEnded on a2', () => a2.ws.events().some((e) => e.type === 'call.ended'));
    const next = sameShardCallId(call.callId);
    const created = await a1.api.post('/v1/calls', { callId: next, calleeUserId: b1.userId, operationId: uid('op') });
    expect(created.status, created.text).toBe(201);
    await waitUntil('the second invitation on b2', () => b2.ws.events().some((e) => e.callId === next));

    expect(messages(b2).map((m) => m.seq)).toEqual([1]);
    expect(messages(a2)).toEqual([]);
    expect(messages(a1).map((m) => m.seq)).toEqual([1]);
    expect(messages(b1).map((m) => m.seq)).toEqual([1, 2]);
    // Not in any event log: the logs hold only the lifecycle events.
    for (const d of [a1, a2, b1, b2]) expect(d.ws.events().every((e) => e.type !== 'call.message')).toBe(true);
  });

  it('arrive in seq order per sender, also when sent concurrently', async () => {
    const { a1, b1 } = await parties();
    const call = await createCall(a1, b1.userId);
    expect((await answer(b1, call.callId)).status).toBe(200);
    const sent = await Promise.all(Array.from({ length: 25 }, (_, i) => send(a1, call.callId, { i })));
    for (const r of sent) expect(r.status, r.text).toBe(200);
    expect(sent.map((r) => r.json.seq as number).sort((x, y) => x - y)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
    await waitUntil('25 messages', () => messages(b1).length >= 25);
    const got = messages(b1);
    expect(got.map((m) => m.seq)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
    // Each seq carries the payload of the request that got it.
    const payloadOfSeq = new Map(sent.map((r, i) => [r.json.seq as number, i]));
    for (const m of got) expect(m.payload).toEqual({ i: payloadOfSeq.get(m.seq) });
  });

  it('are idempotent by operationId: a retry returns the same event and is not delivered again; another body is a conflict', async () => {
    const { a1, b1 } = await parties();
    const call = await createCall(a1, b1.userId);
    const op = uid('op');
    const first = await send(a1, call.callId, { x: 1 }, op);
    const again = await send(a1, call.callId, { x: 1 }, op);
    expect(again.status, again.text).toBe(200);
    expect(again.text).toBe(first.text);
    expectProblem(await send(a1, call.callId, { x: 2 }, op), 'idempotency_conflict', /operationId/);
    const barrier = await send(a1, call.callId, { barrier: true });
    expect(barrier.json.seq).toBe(2);
    await waitUntil('the barrier message', () => messages(b1).some((m) => m.payload.barrier === true));
    expect(messages(b1).map((m) => m.seq)).toEqual([1, 2]);
  });

  it('are refused outside the call: strangers 404, installations not in the call 403, after the end 409 call_not_active', async () => {
    const { a1, a2, b1, b2 } = await parties();
    const stranger = user(url, 1)[0]!;
    const call = await createCall(a1, b1.userId);
    expectProblem(await send(stranger, call.callId, { x: 1 }), 'not_found', 'call not found');
    expectProblem(await send(stranger, randomUUID(), { x: 1 }), 'not_found', 'call not found');
    expectProblem(await send(a2, call.callId, { x: 1 }), 'forbidden', /installations in the call/);
    // A ringing callee installation may send (to the calling installation).
    const early = await send(b2, call.callId, { ringing: true });
    expect(early.status, early.text).toBe(200);
    expect((await answer(b1, call.callId)).status).toBe(200);
    expectProblem(await send(b2, call.callId, { x: 1 }), 'forbidden', /installations in the call/);
    expect((await end(a1, call.callId, 'localHangup')).status).toBe(200);
    expectProblem(await send(a1, call.callId, { x: 1 }), 'call_not_active', /ended/);
    expectProblem(await send(b1, call.callId, { x: 1 }), 'call_not_active', /ended/);
    // An unanswered (rang out) call is ended too.
    const declined = await createCall(a1, b1.userId);
    expect((await end(b1, declined.callId, 'declined')).status).toBe(200);
    expectProblem(await send(a1, declined.callId, { x: 1 }), 'call_not_active', /ended/);
    // Only b2's early message reached a1; nothing refused was stored.
    const stored = await a1.api.get(`/v1/calls/${call.callId}/messages`);
    expect(stored.status, stored.text).toBe(200);
    expect((stored.json.messages as MessageEvent[]).map((m) => m.payload)).toEqual([{ ringing: true }]);
  });

  it('refuse bad input with a problem and store nothing', async () => {
    const { a1, b1 } = await parties();
    const call = await createCall(a1, b1.userId);
    const path = `/v1/calls/${call.callId}/messages`;
    expectProblem(await a1.api.post(path, { operationId: uid('op') }), 'invalid_request', /payload/);
    expectProblem(await a1.api.post(path, { operationId: uid('op'), payload: [1, 2] }), 'invalid_request', /payload/);
    expectProblem(await a1.api.post(path, { operationId: uid('op'), payload: 'sdp' }), 'invalid_request', /payload/);
    expectProblem(await a1.api.post(path, { payload: {} }), 'invalid_request', /operationId/);
    expectProblem(await a1.api.post(path, 'not json', { headers: { 'content-type': 'application/json' } }), 'invalid_request', /JSON/);
    // 16 KiB of payload is accepted; one byte more is not.
    const room = 16 * 1024 - JSON.stringify({ s: '' }).length;
    const fits = await send(a1, call.callId, { s: 'x'.repeat(room) });
    expect(fits.status, fits.text).toBe(200);
    expectProblem(await send(a1, call.callId, { s: 'x'.repeat(room + 1) }), 'payload_too_large', /limit is 16384/);
    expectProblem(await a1.api.get(`${path}?afterSeq=-1`), 'invalid_request', /afterSeq/);
    const stored = await b1.api.get(path);
    expect((stored.json.messages as MessageEvent[]).map((m) => m.seq)).toEqual([1]);
  });

  it('a device that was offline recovers them: its log by cursor, the messages by GET ?afterSeq=', async () => {
    const [a1] = sockets.add(await online(user(url, 1), url));
    const b = user(url, 1)[0]!;
    const [b1] = sockets.add(await online([b], url));
    const call = await createCall(a1!, b.userId);
    await b1!.ws.waitForEvents(1);
    const cursor = b1!.ws.lastCursor!;
    expect((await answer(b, call.callId)).status).toBe(200);
    const first = await send(a1!, call.callId, { n: 1 });
    await waitUntil('the first message', () => messages(b1!).length === 1);
    await b1!.ws.close();
    // Sent while b is offline.
    for (const n of [2, 3]) expect((await send(a1!, call.callId, { n })).status).toBe(200);

    const back = await connect(url, b.token, { cursor, name: 'b-again' });
    try {
      const missed = await b.api.get(`/v1/calls/${call.callId}/messages?afterSeq=${messages(b1!).at(-1)!.seq}`);
      expect(missed.status, missed.text).toBe(200);
      const got = missed.json.messages as MessageEvent[];
      expect(got.map((m) => [m.seq, m.payload])).toEqual([
        [2, { n: 2 }],
        [3, { n: 3 }],
      ]);
      expect(got[0]!.eventId).not.toBe(first.json.eventId);
      // Live again: the next message arrives on the new socket.
      expect((await send(a1!, call.callId, { n: 4 })).status).toBe(200);
      await back.until(() => back.frames.some((f) => f.type === 'message' && (f.event as MessageEvent).seq === 4), 5000, 'message 4');
      // The caller reads only what was sent to it (nothing here), and a stranger cannot read.
      expect((await a1!.api.get(`/v1/calls/${call.callId}/messages`)).json.messages).toEqual([]);
      expectProblem(await user(url, 1)[0]!.api.get(`/v1/calls/${call.callId}/messages`), 'not_found', 'call not found');
    } finally {
      await back.close();
    }
  });
});

describe('in-call messages as signaling frames', () => {
  it('a `message` client frame sends like the HTTP endpoint and is answered with a reply frame carrying the route’s status and body', async () => {
    const { a1, b1 } = await parties();
    const call = await createCall(a1, b1.userId);
    expect((await answer(b1, call.callId)).status).toBe(200);
    const op = uid('op');
    a1.ws.send({ type: 'message', callId: call.callId, operationId: op, payload: { kind: 'offer', sdp: 'v=0' } });
    const reply = await a1.ws.next('reply', 5000);
    expect(reply).toMatchObject({ type: 'reply', operationId: op, status: 200, body: { callId: call.callId, seq: 1 } });
    const sent = reply.body as { eventId: string };
    await waitUntil('the frame-sent message at b1', () => messages(b1).length === 1);
    expect(messages(b1)[0]).toMatchObject({ eventId: sent.eventId, seq: 1, fromInstallationId: a1.installationId, payload: { kind: 'offer', sdp: 'v=0' } });
    // The same operation over HTTP is a replay of it: same event, nothing sent again.
    const replay = await send(a1, call.callId, { kind: 'offer', sdp: 'v=0' }, op);
    expect(replay.json).toMatchObject({ eventId: sent.eventId, seq: 1 });

    a1.ws.send({ type: 'message', callId: call.callId, operationId: 'op-bad', payload: 'not an object' });
    expect(await a1.ws.next('reply', 5000)).toMatchObject({ operationId: 'op-bad', status: 400, body: { code: 'invalid_request', detail: expect.stringMatching(/payload/) } });
    b1.ws.send({ type: 'message', callId: call.callId, operationId: uid('op'), payload: { kind: 'answer' } });
    expect(await b1.ws.next('reply', 5000)).toMatchObject({ status: 200, body: { seq: 1 } });
    await waitUntil('the answer at a1', () => messages(a1).length === 1);

    expect((await end(a1, call.callId, 'localHangup')).status).toBe(200);
    const late = uid('op');
    a1.ws.send({ type: 'message', callId: call.callId, operationId: late, payload: { kind: 'candidate' } });
    expect(await a1.ws.next('reply', 5000)).toMatchObject({ operationId: late, status: 409, body: { code: 'call_not_active' } });
    expect(messages(b1)).toHaveLength(1);
  });
});

/** A real video offer: Chromium's createOffer() for one audio and one video transceiver (5.2 KB). */
const VIDEO_OFFER = readFileSync(new URL('../fixtures/chromium-video-offer.sdp', import.meta.url), 'utf8');

describe('SDP-sized message frames', () => {
  it('a real video offer, and a payload of the largest size (16 KiB), each fit one `message` frame by default', async () => {
    const { a1, b1 } = await parties();
    const call = await createCall(a1, b1.userId);
    expect((await answer(b1, call.callId)).status).toBe(200);
    expect(VIDEO_OFFER).toMatch(/^v=0\r?\n[\s\S]*m=video /);
    a1.ws.send({ type: 'message', callId: call.callId, operationId: uid('op'), payload: { kind: 'offer', sdp: VIDEO_OFFER } });
    expect(await a1.ws.next('reply', 5000)).toMatchObject({ status: 200, body: { seq: 1 } });
    // The largest payload the HTTP route takes: 16 KiB of JSON text.
    const largest = { pad: 'x'.repeat(MESSAGE_PAYLOAD_MAX_BYTES - '{"pad":""}'.length) };
    expect(Buffer.byteLength(JSON.stringify(largest))).toBe(MESSAGE_PAYLOAD_MAX_BYTES);
    a1.ws.send({ type: 'message', callId: call.callId, operationId: uid('op'), payload: largest });
    expect(await a1.ws.next('reply', 5000)).toMatchObject({ status: 200, body: { seq: 2 } });
    await waitUntil('both messages at b1', () => messages(b1).length === 2);
    expect(messages(b1)[0]!.payload).toEqual({ kind: 'offer', sdp: VIDEO_OFFER });
    expect(messages(b1)[1]!.payload).toEqual(largest);
  });
});

describe('in-call message limits', () => {
  let limited: Stack;
  stackForFile({ RATE_CALL_MESSAGES_PER_10S: '30', EVENT_LOG_MAX_LEN: '10' }, (s) => (limited = s));

  it('rate-limit per call and sender, and never push lifecycle events out of the event log', async () => {
    const lurl = limited.url;
    const [a1] = sockets.add(await online(user(lurl, 1), lurl));
    const [b1] = sockets.add(await online(user(lurl, 1), lurl));
    const start = b1!.ws.lastCursor!;
    const call = await createCall(a1!, b1!.userId);
    expect((await answer(b1!, call.callId)).status).toBe(200);
    for (let i = 0; i < 30; i++) {
      const r = await send(a1!, call.callId, { i });
      expect(r.status, r.text).toBe(200);
    }
    const overOp = uid('op');
    const over = await send(a1!, call.callId, { i: 30 }, overOp);
    expectProblem(over, 'rate_limited', /too many messages/);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // The other sender on the same call has a budget of its own.
    const reply = await send(b1!, call.callId, { back: true });
    expect(reply.status, reply.text).toBe(200);
    // A refused message leaves its operationId unused (were it bound, another request with it
    // would be an idempotency conflict): the limited one, and one refused for an unknown call.
    const unknownOp = uid('op');
    expectProblem(await send(a1!, randomUUID(), { lost: true }, unknownOp), 'not_found', 'call not found');
    const [c1] = user(lurl, 1);
    const other = await createCall(a1!, c1!.userId);
    for (const op of [overOp, unknownOp]) {
      const reused = await send(a1!, other.callId, { op }, op);
      expect(reused.status, reused.text).toBe(200);
    }
    await waitUntil('30 messages at b1', () => messages(b1!).length === 30);
    // 31 messages against a log of 10 entries: the invitation is still in b's log, no gap.
    const { events } = await readAllEvents(b1!, start);
    expect(events.map((e) => `${e.type}/${e.callId}`)).toEqual([`call.invited/${call.callId}`]);
  });
});
