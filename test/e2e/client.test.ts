import { createHmac, randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import WebSocket from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  CallingClient,
  ProblemError,
  SignalingAuthError,
  SignalingClient,
  type AuthFailure,
  type CallEventsPage,
  type CallSnapshot,
  type EventPayload,
  type SignalingOptions,
} from '@calling-backend/client';
import { eventSchema } from '../../src/events/payloadSchemas.js';
import { mintToken } from '../../src/auth/devTokens.js';
import { startStack, type Stack } from '../support/stack.js';
import type { TestServer } from '../support/server.js';
import { TEST_JWT_SECRET, tokenFor, type Identity } from '../support/tokens.js';
import { DEFAULT_CALL_SHARDS, relayDone, shardBarriers, sleep, uid } from '../support/fixtures.js';
import { waitUntil } from '../support/wait.js';

/**
 * The project's typed client (packages/client, from source) against real server processes: CallingClient for the
 * HTTP API and SignalingClient (with `ws` as its WebSocket) for the events, through a whole call;
 * then SignalingClient's automatic resume across a gateway restart, its eventId deduplication
 * against frames the server really repeats, the msgpack encoding, and stop().
 */

const TURN_URL = 'turn:127.0.0.1:3478';
const TURN_SECRET = 'turn-secret-for-the-client-tests';
const MEDIA_ENV = { TURN_URLS: TURN_URL, TURN_SECRET };
const WAIT_MS = 10_000;

let stack: Stack;
let A: TestServer;
/** Process B listens on a fixed port so that it can be restarted where its clients reconnect. */
let B: TestServer;
let bPort: number;
const clients: SignalingClient[] = [];

/** Starts the client (kept to be stopped after the test) and returns why its sign-in was refused. */
async function authFailureOf(client: SignalingClient): Promise<SignalingAuthError['failure']> {
  clients.push(client);
  const err = await client.start().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SignalingAuthError);
  return (err as SignalingAuthError).failure;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

async function startB(): Promise<TestServer> {
  // A port just released can be briefly unavailable: retry a few times.
  for (let attempt = 1; ; attempt++) {
    try {
      return await stack.addServer({ ...MEDIA_ENV, PORT: String(bPort) });
    } catch (err) {
      if (attempt >= 5) throw err;
      await sleep(500);
    }
  }
}

beforeAll(async () => {
  stack = await startStack(MEDIA_ENV);
  A = stack.servers[0]!;
  bPort = await freePort();
  B = await startB();
});

afterEach(() => {
  for (const c of clients.splice(0)) c.stop();
});

afterAll(async () => {
  await stack?.stop();
});

const wsUrl = (server: { port: number }) => `ws://127.0.0.1:${server.port}`;

interface Party extends Identity {
  token: string;
}

function party(userId: string, installationId: string, name?: string): Party {
  const id: Identity = { userId, installationId, ...(name !== undefined ? { name } : {}) };
  return { ...id, token: tokenFor(id) };
}

/** A new user with two installations, its phone and its tablet. */
function phoneAndTablet(name: string): [userId: string, phone: Party, tablet: Party] {
  const userId = uid(name);
  return [userId, party(userId, `${userId}-phone`), party(userId, `${userId}-tablet`)];
}

/**
 * A CallingClient (its commands over `signaling` when given) that records each HTTP request it
 * makes in `sent`, as `METHOD /path`, with ` <body>` after it when `bodies` is set.
 */
function recordingClient(server: { url: string }, p: Party, sent: string[], opts: { signaling?: SignalingClient; bodies?: boolean } = {}): CallingClient {
  return new CallingClient({
    baseUrl: server.url,
    token: p.token,
    ...(opts.signaling ? { signaling: opts.signaling } : {}),
    fetch: (url: string, init: { method?: string; body?: string }) => {
      const body = opts.bodies && init.body !== undefined ? ` ${init.body}` : '';
      sent.push(`${init.method ?? 'GET'} ${new URL(url).pathname}${body}`);
      return fetch(url, init as RequestInit);
    },
  });
}

function http(server: { url: string }, p: Party): CallingClient {
  return new CallingClient({ baseUrl: server.url, token: p.token });
}

/** What a SignalingClient reported through its callbacks. */
class Recorder {
  readonly events: { event: EventPayload; cursor: string }[] = [];
  readonly synced: string[] = [];
  /** The last cursor the client handed on, with an event or alone (onCursor), or at `synced` or a gap. */
  cursor: string | undefined;
  /**
   * Events handed on early (with the cursor before them: docs/signaling.md "Early events") whose
   * copy from the log has not come yet: until it has, the log may not hold them.
   */
  awaitingLog = 0;
  readonly closes: { code: number; reason: string }[] = [];
  readonly gaps: string[] = [];
  /**
   * `synced` frames since the last close: a reconnect's. (A socket also resyncs without closing,
   * after a hole in its live messages or a resubscription, as a loaded cluster run showed.)
   */
  syncedSinceClose = 0;

  constructor(readonly name: string) {}

  /** Closed at least once, and synced again after the last close. */
  reconnected(): boolean {
    return this.closes.length > 0 && this.syncedSinceClose > 0;
  }

  /** The events delivered, without those of the calls in `except` (barrier calls). */
  payloads(except: ReadonlySet<string> = new Set()): EventPayload[] {
    return this.events.map((e) => e.event).filter((e) => !except.has(e.callId));
  }

  shape(except?: ReadonlySet<string>): string[] {
    return this.payloads(except).map((e) => `${e.type}/${e.callId}${'reason' in e ? `/${e.reason}` : ''}`);
  }

  until(what: string, done: () => boolean, timeoutMs = WAIT_MS): Promise<void> {
    return waitUntil(`${this.name}: ${what}`, done, timeoutMs, { intervalMs: 20, detail: () => `events ${JSON.stringify(this.shape())}, closes ${JSON.stringify(this.closes)}` });
  }

  waitForEvents(n: number, timeoutMs = WAIT_MS): Promise<void> {
    return this.until(`${n} events`, () => this.events.length >= n, timeoutMs);
  }

  /** No eventId was delivered twice, and every payload is a valid event. */
  expectClean(): void {
    const ids = this.payloads().map((e) => e.eventId);
    expect(new Set(ids).size, `${this.name} delivered a repeated eventId: ${JSON.stringify(ids)}`).toBe(ids.length);
    for (const e of this.payloads()) expect(() => eventSchema.parse(e), JSON.stringify(e)).not.toThrow();
  }
}

type Ctor = NonNullable<SignalingOptions['WebSocket']>;

/**
 * Proves "nothing else arrived" without a quiet period: for each user, barrier calls on the outbox
 * shards of the calls `after` (shardBarriers in test/support/fixtures.ts), which reach every
 * installation of the user after anything the calls' changes so far sent it; resolves once each of
 * the user's recorders has an event of each of its barrier calls. Returns the barrier calls' ids,
 * for the checks to leave out.
 */
async function barrier(after: string[], users: [userId: string, recs: Recorder[]][]): Promise<Set<string>> {
  const ids = new Set<string>();
  await Promise.all(
    users.map(async ([userId, recs]) => {
      const barriers = await shardBarriers(A.url, userId, after);
      for (const id of barriers) ids.add(id);
      // The barrier events may come early, ahead of the log: wait for the log's copies too.
      await Promise.all(
        recs.map((r) => r.until('the barrier calls, from the log', () => barriers.every((id) => r.payloads().some((e) => e.callId === id)) && r.awaitingLog === 0)),
      );
    }),
  );
  return ids;
}

async function online(
  server: { port: number },
  p: Party,
  opts: Partial<Omit<SignalingOptions, 'onEvent'>> = {},
): Promise<{ client: SignalingClient; rec: Recorder }> {
  const rec = new Recorder(p.installationId);
  const client = new SignalingClient({
    url: wsUrl(server),
    token: p.token,
    WebSocket, // the `ws` package's class, as is
    maxBackoffMs: 400,
    onEvent: (event, cursor) => {
      if (cursor === rec.cursor) rec.awaitingLog++;
      rec.events.push({ event, cursor });
      rec.cursor = cursor;
    },
    onCursor: (cursor) => {
      rec.awaitingLog = Math.max(0, rec.awaitingLog - 1);
      rec.cursor = cursor;
    },
    onSynced: (cursor) => {
      rec.synced.push(cursor);
      rec.syncedSinceClose++;
      rec.cursor = cursor;
    },
    onClose: (code, reason) => {
      rec.closes.push({ code, reason });
      rec.syncedSinceClose = 0;
    },
    onGap: (reason, cursor) => {
      rec.gaps.push(reason);
      rec.cursor = cursor;
    },
    ...opts,
  });
  clients.push(client);
  await client.start();
  return { client, rec };
}

/** A `ws` WebSocket that records every frame it receives and every URL it was opened with. */
function capturingWebSocket() {
  const opened: string[] = [];
  const frames: { data: Buffer; isBinary: boolean }[] = [];
  /** When set, the next connection asks for this cursor instead of the client's own. */
  const rewind: { cursor: string | undefined } = { cursor: undefined };
  class CapturingWebSocket extends WebSocket {
    constructor(url: string, protocols?: string | string[], options?: WebSocket.ClientOptions) {
      let target = url;
      if (rewind.cursor !== undefined) {
        const u = new URL(url);
        u.searchParams.set('cursor', rewind.cursor);
        target = u.toString();
        rewind.cursor = undefined;
      }
      opened.push(target);
      super(target, protocols, options);
      this.on('message', (data, isBinary) => {
        frames.push({ data: Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer), isBinary });
      });
    }
  }
  /** The cursor the server sent with an event's copy from the log (not its early copy: docs/signaling.md "Early events"). */
  const logCursorOf = (eventId: string) =>
    frames
      .map((f) => JSON.parse(f.data.toString('utf8')) as { type: string; cursor?: string; event?: EventPayload })
      .find((f) => f.type === 'event' && f.cursor !== undefined && f.event!.eventId === eventId)?.cursor;
  return { Ctor: CapturingWebSocket as Ctor, opened, frames, rewind, logCursorOf };
}

function problemOf(err: unknown): ProblemError {
  expect(err).toBeInstanceOf(ProblemError);
  return err as ProblemError;
}

describe('a whole call through CallingClient and SignalingClient', () => {
  it('create, invite, answer (one winner), media session, rename, hang-up', async () => {
    const alice = party(uid('alice'), uid('alice-phone'), 'Alice');
    const [bobId, bobPhone, bobTablet] = phoneAndTablet('bob');
    const aliceApi = http(A, alice);
    const phoneApi = http(B, bobPhone);
    const tabletApi = http(A, bobTablet);

    const startCursor = (await phoneApi.callEvents()).nextCursor;
    const a = await online(A, alice);
    const phone = await online(B, bobPhone); // the callee's phone talks to the other process
    const tablet = await online(A, bobTablet);
    // Each came online on its first connection. (It may sync again without closing: on a cluster
    // that just started, ioredis re-subscribes after a slots refresh, and the gateway resyncs.)
    for (const s of [a, phone, tablet]) {
      expect(s.rec.closes).toEqual([]);
      expect(s.rec.synced.length).toBeGreaterThan(0);
    }

    // Create (and an idempotent retry of the same request).
    const callId = randomUUID();
    const operationId = uid('op');
    const created = await aliceApi.createCall({ calleeUserId: bobId, callId, video: true, operationId });
    expect(created).toMatchObject({
      callId,
      state: 'ringing',
      revision: '1',
      video: true,
      calleeUserId: bobId,
      caller: { userId: alice.userId, displayName: 'Alice', handle: `app:${encodeURIComponent(alice.userId)}` },
    });
    expect(await aliceApi.createCall({ calleeUserId: bobId, callId, video: true, operationId })).toEqual(created);

    // Both callee installations are invited.
    await Promise.all([phone.rec.waitForEvents(1), tablet.rec.waitForEvents(1)]);
    for (const s of [phone, tablet]) {
      expect(s.rec.payloads()[0]).toMatchObject({
        type: 'call.invited',
        callId,
        revision: '1',
        displayName: 'Alice',
        handle: created.caller.handle,
        video: true,
        expiresAtMs: created.expiresAtMs,
      });
    }

    // The phone answers; the caller hears call.accepted, the tablet answeredElsewhere.
    const answered = await phoneApi.answer(callId, { installationId: bobPhone.installationId, expectedRevision: '1' });
    expect(answered).toMatchObject({ callId, state: 'accepted', revision: '2', answeredByInstallationId: bobPhone.installationId });
    await Promise.all([a.rec.waitForEvents(1), tablet.rec.waitForEvents(2)]);
    expect(a.rec.payloads()[0]).toMatchObject({ type: 'call.accepted', callId, revision: '2', answeredByInstallationId: bobPhone.installationId });
    expect(tablet.rec.payloads()[1]).toMatchObject({ type: 'call.ended', callId, reason: 'answeredElsewhere' });

    // A second device answering loses with a typed problem carrying the winner's snapshot.
    const lost = problemOf(await tabletApi.answer(callId, { installationId: bobTablet.installationId }).catch((e: unknown) => e));
    expect(lost.code).toBe('answer_conflict');
    expect(lost.status).toBe(409);
    expect(lost.message).toMatch(/^409 answer_conflict: /);
    expect(lost.problem.snapshot).toMatchObject({ callId, state: 'accepted', answeredByInstallationId: bobPhone.installationId });

    // Media sessions for the two parties in the call (TURN REST credentials), none for the tablet.
    for (const [api, who] of [
      [aliceApi, alice],
      [phoneApi, bobPhone],
    ] as const) {
      const media = await api.mediaSession(callId);
      expect(media.expiresAtMs).toBeGreaterThan(Date.now());
      expect(media.iceServers).toHaveLength(1);
      const [turn] = media.iceServers;
      expect(turn!.urls).toEqual([TURN_URL]);
      expect(turn!.username).toBe(`${media.expiresAtMs / 1000}:${who.userId}`);
      expect(turn!.credential).toBe(createHmac('sha1', TURN_SECRET).update(turn!.username!).digest('base64'));
    }
    expect(problemOf(await tabletApi.mediaSession(callId).catch((e: unknown) => e)).code).toBe('answer_conflict');

    // Rename: only the answering installation is told.
    const renamed = await aliceApi.rename(callId, { displayName: 'Alice (work)' });
    expect(renamed).toMatchObject({ revision: '3', caller: { displayName: 'Alice (work)' } });
    await phone.rec.waitForEvents(2);
    expect(phone.rec.payloads()[1]).toMatchObject({ type: 'call.renamed', callId, revision: '3', displayName: 'Alice (work)' });

    // Hang-up: the caller ends, the callee hears remoteEnded.
    const ended = await aliceApi.end(callId, { reason: 'localHangup' });
    expect(ended).toMatchObject({ callId, state: 'ended', endReason: 'localHangup' });
    await phone.rec.waitForEvents(3);
    expect(phone.rec.payloads()[2]).toMatchObject({ type: 'call.ended', callId, reason: 'remoteEnded' });
    expect(await phoneApi.getCall(callId)).toMatchObject({ state: 'ended', endReason: 'remoteEnded' });

    // Nothing more, nothing twice; the phone saw exactly what its log holds (the barrier calls'
    // events too, last).
    const barriers = await barrier([callId], [
      [alice.userId, [a.rec]],
      [bobId, [phone.rec, tablet.rec]],
    ]);
    expect(a.rec.shape(barriers)).toEqual([`call.accepted/${callId}`]);
    expect(phone.rec.shape(barriers)).toEqual([`call.invited/${callId}`, `call.renamed/${callId}`, `call.ended/${callId}/remoteEnded`]);
    expect(tablet.rec.shape(barriers)).toEqual([`call.invited/${callId}`, `call.ended/${callId}/answeredElsewhere`]);
    for (const s of [a, phone, tablet]) {
      s.rec.expectClean();
      expect(s.rec.closes).toEqual([]);
      expect(s.client.cursor).toBe(s.rec.cursor);
    }
    const page = await phoneApi.callEvents(startCursor);
    expect(page.gap).toBeUndefined();
    expect(page.events).toEqual(phone.rec.payloads());
    expect(page.nextCursor).toBe(phone.client.cursor);

    // Other problems come typed too.
    const missing = problemOf(await aliceApi.getCall(randomUUID()).catch((e: unknown) => e));
    expect([missing.status, missing.code]).toEqual([404, 'not_found']);
  });

  it('history through the client: pages newest first, missed calls apart', async () => {
    const alice = party(uid('alice'), uid('inst'));
    const bob = party(uid('bob'), uid('inst'));
    const [aliceApi, bobApi] = [http(A, alice), http(A, bob)];
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const call = await aliceApi.createCall({ calleeUserId: bob.userId });
      await aliceApi.end(call.callId, { reason: 'localHangup' });
      ids.push(call.callId);
    }
    const answered = await aliceApi.createCall({ calleeUserId: bob.userId });
    await bobApi.answer(answered.callId, { installationId: bob.installationId });
    await bobApi.end(answered.callId, { reason: 'localHangup' });
    ids.push(answered.callId);
    await waitUntil('the history filed', async () => (await bobApi.history({ limit: 200 })).calls.length === 4);

    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await bobApi.history({ limit: 3, ...(cursor ? { cursor } : {}) });
      seen.push(...page.calls.map((c) => c.callId));
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    // Every call once (calls that ended in the same millisecond are ordered by callId).
    expect([...seen].sort()).toEqual([...ids].sort());
    expect(seen[0]).toBe(answered.callId);
    const missed = await bobApi.history({ missed: true });
    expect(missed.calls.map((c) => c.callId).sort()).toEqual(ids.slice(0, 3).sort());
    expect(missed.calls[0]).toMatchObject({ direction: 'incoming', peerUserId: alice.userId, endReason: 'callerCancelled', missed: true });
    expect(problemOf(await bobApi.history({ cursor: 'nope' }).catch((e: unknown) => e)).code).toBe('invalid_request');
  });

  it('with its socket open the commands go as frames (no HTTP request), in-call messages arrive through onMessage; without it over HTTP', async () => {
    const alice = party(uid('alice'), uid('alice-phone'));
    const bob = party(uid('bob'), uid('bob-phone'));
    const messages: { to: string; payload: Record<string, unknown>; seq: number }[] = [];
    const [aliceWs, bobWs] = await Promise.all(
      [alice, bob].map(async (p) => (await online(A, p, { onMessage: (m) => messages.push({ to: p.userId, payload: m.payload, seq: m.seq }) })).client),
    );
    /** The HTTP requests each client made, by method and path. */
    const requests: string[] = [];
    const [aliceApi, bobApi] = [recordingClient(A, alice, requests, { signaling: aliceWs! }), recordingClient(A, bob, requests, { signaling: bobWs! })];
    const call = await aliceApi.createCall({ calleeUserId: bob.userId });
    expect(requests).toEqual(['POST /v1/calls']);
    const answered = await bobApi.answer(call.callId, { installationId: bob.installationId });
    expect(answered).toMatchObject({ state: 'accepted', answeredByInstallationId: bob.installationId });
    const sent = await aliceApi.sendMessage(call.callId, { kind: 'offer', sdp: 'v=0' });
    expect(sent).toMatchObject({ callId: call.callId, seq: 1 });
    await bobApi.sendMessage(call.callId, { kind: 'answer', sdp: 'v=0' });
    expect((await aliceApi.rename(call.callId, { displayName: 'Alice at work' })).callId).toBe(call.callId);
    // A refusal over the socket is the same typed problem as over HTTP.
    const conflict = problemOf(await bobApi.answer(call.callId, { installationId: 'not-mine' }).catch((e: unknown) => e));
    expect([conflict.status, conflict.code]).toEqual([403, 'forbidden']);
    await waitUntil('both messages delivered', () => messages.length === 2);
    // Order holds per recipient (seq), not across two users' sockets: compare each one's own.
    const to = (userId: string) => messages.filter((m) => m.to === userId);
    expect(to(bob.userId)).toEqual([{ to: bob.userId, payload: { kind: 'offer', sdp: 'v=0' }, seq: 1 }]);
    expect(to(alice.userId)).toEqual([{ to: alice.userId, payload: { kind: 'answer', sdp: 'v=0' }, seq: 1 }]);
    // No command went over HTTP. A `synced` on the open socket (on a cluster, the gateway re-reads
    // the log after ioredis re-subscribes: docs/signaling.md) makes the client fetch the call's
    // in-call messages, which is a read, not a command.
    const commands = () => requests.filter((r) => r !== `GET /v1/calls/${call.callId}/messages`);
    expect(commands()).toEqual(['POST /v1/calls']);

    // The socket stopped: the same calls go over HTTP.
    aliceWs!.stop();
    await waitUntil('the socket closed', () => !aliceWs!.isOpen);
    const ended = await aliceApi.end(call.callId, { reason: 'localHangup' });
    expect(ended).toMatchObject({ state: 'ended', endReason: 'localHangup' });
    expect(commands()).toEqual(['POST /v1/calls', `POST /v1/calls/${call.callId}/end`]);
  });

  it('push tokens through the client: register (token never echoed) and remove', async () => {
    const p = party(uid('user'), uid('inst'));
    const api = http(A, p);
    const token = 'ab'.repeat(32);
    const reg = await api.putPushToken(p.installationId, 'iosVoip', { token, appId: 'com.example.calls', iosEnvironment: 'development' });
    expect(reg).toMatchObject({ installationId: p.installationId, kind: 'iosVoip', appId: 'com.example.calls', iosEnvironment: 'development' });
    expect(JSON.stringify(reg)).not.toContain(token);
    expect(token.endsWith(reg.tokenSuffix)).toBe(true);
    await expect(api.deletePushToken(p.installationId, 'iosVoip')).resolves.toBeUndefined();
    expect(problemOf(await api.putPushToken(uid('other'), 'iosVoip', { token, appId: 'x', iosEnvironment: 'production' }).catch((e: unknown) => e)).code).toBe(
      'forbidden',
    );
  });
});

describe('a group call through CallingClient and SignalingClient', () => {
  it('create with a title, ringing receipts, joins from two members (one winner per member), a late invite, a leave, an end for all: each installation sees its events', async () => {
    const alice = party(uid('alice'), uid('alice-phone'), 'Alice');
    const [bobId, bobPhone, bobTablet] = phoneAndTablet('bob');
    const carol = party(uid('carol'), uid('carol-phone'));
    const dave = party(uid('dave'), uid('dave-phone'));
    const names = new Map([alice, bobPhone, carol, dave].map((p, i) => [p.userId, ['alice', 'bob', 'carol', 'dave'][i]!]));
    /** An event as `type[/who][/state or reason]`, users by name. */
    const shapeOf = (e: EventPayload) => {
      const who = 'userId' in e ? `/${names.get(e.userId)}` : '';
      const what = 'state' in e ? `/${e.state}` : 'reason' in e ? `/${e.reason}` : '';
      return `${e.type}${who}${what}`;
    };
    // Each installation online (alice and bob's phone on the other process); commands over the
    // socket, but carol's client has no socket and sends hers over HTTP.
    const a = await online(A, alice);
    const phone = await online(B, bobPhone);
    const tablet = await online(A, bobTablet);
    const c = await online(A, carol);
    const d = await online(B, dave);
    /** The HTTP requests of the clients with a socket. */
    const requests: string[] = [];
    const aliceApi = recordingClient(A, alice, requests, { signaling: a.client });
    const phoneApi = recordingClient(B, bobPhone, requests, { signaling: phone.client });
    const tabletApi = recordingClient(A, bobTablet, requests, { signaling: tablet.client });
    const carolApi = http(A, carol);
    const daveApi = recordingClient(B, dave, requests, { signaling: d.client });
    const statesOf = (s: CallSnapshot) => s.participants!.map((p) => `${names.get(p.userId)}:${p.state}`);

    // Create: bob and carol ring, with the title as the invitation's displayName.
    const created = await aliceApi.createGroupCall({ calleeUserIds: [bobId, carol.userId], title: 'Standup' });
    expect(created).toMatchObject({ state: 'ringing', calleeUserId: '', title: 'Standup', revision: '1' });
    expect(statesOf(created)).toEqual(['alice:joined', 'bob:invited', 'carol:invited']);
    expect(created.participants![0]!.installationId).toBe(alice.installationId);
    const { callId } = created;
    await Promise.all([phone.rec.waitForEvents(1), tablet.rec.waitForEvents(1), c.rec.waitForEvents(1)]);
    for (const s of [phone, tablet, c]) expect(s.rec.payloads()[0]).toMatchObject({ type: 'call.invited', callId, displayName: 'Standup', revision: '1' });

    // Ringing receipts: the first per member moves it to ringing; bob's tablet's changes nothing.
    const bobRinging = await phoneApi.ringing(callId, { via: 'socket' });
    expect(statesOf(bobRinging)).toEqual(['alice:joined', 'bob:ringing', 'carol:invited']);
    expect((await tabletApi.ringing(callId, { via: 'apns' })).revision).toBe(bobRinging.revision);
    const carolRinging = await carolApi.ringing(callId, { via: 'fcm' });
    expect(statesOf(carolRinging)).toEqual(['alice:joined', 'bob:ringing', 'carol:ringing']);
    await a.rec.until('both receipts', () => a.rec.payloads().filter((e) => e.type === 'call.ringing').length === 2);

    // Bob joins from his phone; his tablet, answering too, loses with the winner in the snapshot.
    const bobJoined = await phoneApi.answer(callId, { installationId: bobPhone.installationId });
    expect(bobJoined.state).toBe('accepted');
    expect(bobJoined.participants![1]).toMatchObject({ userId: bobId, state: 'joined', installationId: bobPhone.installationId });
    const lost = problemOf(await tabletApi.answer(callId, { installationId: bobTablet.installationId }).catch((e: unknown) => e));
    expect([lost.status, lost.code]).toEqual([409, 'answer_conflict']);
    expect(lost.problem.snapshot!.participants![1]).toMatchObject({ userId: bobId, installationId: bobPhone.installationId });
    // Carol joins over HTTP.
    expect(statesOf(await carolApi.answer(callId, { installationId: carol.installationId }))).toEqual(['alice:joined', 'bob:joined', 'carol:joined']);

    // Bob rings dave into the live call; carol leaves; alice ends it for everyone.
    const invited = await phoneApi.invite(callId, { userIds: [dave.userId] });
    expect(statesOf(invited)).toEqual(['alice:joined', 'bob:joined', 'carol:joined', 'dave:invited']);
    await d.rec.waitForEvents(1);
    expect(d.rec.payloads()[0]).toMatchObject({ type: 'call.invited', callId, displayName: 'Standup', revision: invited.revision });
    // Only a member in the call may invite: dave, still ringing, may not.
    const refused = problemOf(await daveApi.invite(callId, { userIds: [uid('erin')] }).catch((e: unknown) => e));
    expect([refused.status, refused.code]).toEqual([403, 'forbidden']);
    const carolLeft = await carolApi.end(callId, { reason: 'localHangup' });
    expect(carolLeft.state).toBe('accepted');
    expect(statesOf(carolLeft)).toEqual(['alice:joined', 'bob:joined', 'carol:left', 'dave:invited']);
    const ended = await aliceApi.end(callId, { reason: 'localHangup', forAll: true });
    expect(ended.state).toBe('ended');
    expect(statesOf(ended)).toEqual(['alice:left', 'bob:left', 'carol:left', 'dave:missed']);
    // Ended, the call takes no more invitations.
    const late = problemOf(await phoneApi.invite(callId, { userIds: [uid('erin')] }).catch((e: unknown) => e));
    expect([late.status, late.code]).toEqual([409, 'call_not_active']);

    // What each installation saw, once each, and nothing more.
    const barriers = await barrier([callId], [
      [alice.userId, [a.rec]],
      [bobId, [phone.rec, tablet.rec]],
      [carol.userId, [c.rec]],
      [dave.userId, [d.rec]],
    ]);
    const seen = (r: Recorder) => r.payloads(barriers).map(shapeOf);
    expect(seen(a.rec)).toEqual([
      // The caller, in the call from the start, gets call.participant for each receipt too.
      'call.ringing/bob',
      'call.participant/bob/ringing',
      'call.ringing/carol',
      'call.participant/carol/ringing',
      'call.participant/bob/joined',
      'call.participant/carol/joined',
      'call.participant/dave/invited',
      'call.participant/carol/left',
    ]);
    expect(seen(phone.rec)).toEqual(['call.invited', 'call.participant/carol/joined', 'call.participant/dave/invited', 'call.participant/carol/left', 'call.ended/remoteEnded']);
    expect(seen(tablet.rec)).toEqual(['call.invited', 'call.ended/answeredElsewhere']);
    expect(seen(c.rec)).toEqual(['call.invited', 'call.participant/dave/invited']);
    expect(seen(d.rec)).toEqual(['call.invited', 'call.ended/remoteEnded']);
    for (const s of [a, phone, tablet, c, d]) {
      s.rec.expectClean();
      expect(s.rec.payloads(barriers).every((e) => e.callId === callId)).toBe(true);
      expect(s.client.cursor).toBe(s.rec.cursor);
    }
    // The events carry what the app shows: who joined on which installation, in revision order.
    const joined = a.rec.payloads().find((e) => e.type === 'call.participant' && e.userId === bobId && e.state === 'joined');
    expect(joined).toMatchObject({ state: 'joined', installationId: bobPhone.installationId, revision: bobJoined.revision });
    const revisions = a.rec.payloads(barriers).map((e) => BigInt(e.revision));
    expect(revisions).toEqual([...revisions].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)));
    expect(await carolApi.getCall(callId)).toMatchObject({ state: 'ended', title: 'Standup', participants: ended.participants });
    // Receipts, joins, invitations and ends went over the sockets as frames, refusals included.
    expect(requests).toEqual(['POST /v1/calls']);
  });

  it('a one-to-one call sends the same request bodies as before (no title, no forAll, no calleeUserIds); its ringing receipt reaches the caller as call.ringing', async () => {
    const alice = party(uid('alice'), uid('alice-phone'));
    const bob = party(uid('bob'), uid('bob-phone'));
    const a = await online(A, alice);
    const sent: string[] = [];
    const callId = uid('call');
    const call = await recordingClient(A, alice, sent, { bodies: true }).createCall({ calleeUserId: bob.userId, callId, operationId: 'op-1' });
    expect(call).not.toHaveProperty('participants');
    expect(call).not.toHaveProperty('title');
    const bobApi = recordingClient(A, bob, sent, { bodies: true });
    await bobApi.ringing(callId, { via: 'socket', operationId: 'op-2' });
    await bobApi.end(callId, { reason: 'declined', operationId: 'op-3' });
    expect(sent).toEqual([
      `POST /v1/calls {"callId":"${callId}","calleeUserId":"${bob.userId}","video":false,"operationId":"op-1"}`,
      `POST /v1/calls/${callId}/ringing {"via":"socket","operationId":"op-2"}`,
      `POST /v1/calls/${callId}/end {"reason":"declined","operationId":"op-3"}`,
    ]);
    // The receipt keeps the revision (the invitation's); the caller's app gets it, then the decline.
    await a.rec.waitForEvents(2);
    expect(a.rec.payloads()).toMatchObject([
      { type: 'call.ringing', callId, userId: bob.userId, revision: '1' },
      { type: 'call.ended', callId, reason: 'declined', revision: '2' },
    ]);
    a.rec.expectClean();
  });
});

describe('SignalingClient automatic resume', () => {
  it('reconnects by itself when its gateway restarts on the same port, and gets the missed events exactly once', async () => {
    const caller = party(uid('caller'), uid('caller-phone'));
    const callee = party(uid('callee'), uid('callee-phone'));
    const callerApi = http(A, caller);
    const calleeApiA = http(A, callee);
    const cap = capturingWebSocket();
    const c = await online(B, callee, { WebSocket: cap.Ctor });

    // One event while connected.
    const c0 = await callerApi.createCall({ calleeUserId: callee.userId });
    await c.rec.waitForEvents(1);
    // Past the first event once its copy from the log came (the event itself may come early).
    await c.rec.until('the cursor past the first event', () => c.client.cursor === cap.logCursorOf(c.rec.events[0]!.event.eventId));
    const cursorBefore = c.client.cursor!;
    expect(c.rec.cursor).toBe(cursorBefore);

    // B goes away: the client is told 1001 and starts retrying.
    await B.stop();
    await c.rec.until('the 1001 close', () => c.rec.closes.length >= 1);
    expect(c.rec.closes[0]).toEqual({ code: 1001, reason: 'server shutting down; reconnect with your cursor' });

    // Meanwhile, through A: the call is cancelled, another rings and is cancelled, a third rings.
    await callerApi.end(c0.callId, { reason: 'localHangup' });
    const c1 = await callerApi.createCall({ calleeUserId: callee.userId });
    await callerApi.end(c1.callId, { reason: 'failed' });
    const c2 = await callerApi.createCall({ calleeUserId: callee.userId });
    let missed: EventPayload[] = [];
    await waitUntil('the 4 events in the log', async () => (missed = (await calleeApiA.callEvents(cursorBefore)).events).length >= 4, WAIT_MS, {
      intervalMs: 50,
      detail: () => JSON.stringify(missed.map((e) => `${e.type}/${e.callId}`)),
    });
    // Each call's events in order; different calls may interleave (docs/architecture.md "Relays").
    const missedShape = missed.map((e) => `${e.type}/${e.callId}${'reason' in e ? `/${e.reason}` : ''}`);
    expect([...missedShape].sort()).toEqual(
      [`call.ended/${c0.callId}/callerCancelled`, `call.invited/${c1.callId}`, `call.ended/${c1.callId}/callerCancelled`, `call.invited/${c2.callId}`].sort(),
    );
    expect(missedShape.indexOf(`call.invited/${c1.callId}`)).toBeLessThan(missedShape.indexOf(`call.ended/${c1.callId}/callerCancelled`));
    expect(c.rec.events).toHaveLength(1);
    const attemptsWhileDown = cap.opened.length;

    // B comes back on the same port: the client reconnects with its cursor and catches up.
    B = await startB();
    await c.rec.until('resynced', () => c.rec.reconnected());
    await c.rec.waitForEvents(5);
    expect(cap.opened.length).toBeGreaterThan(attemptsWhileDown);
    // The reconnect asked for the events after the last one it processed.
    expect(new URL(cap.opened.at(-1)!).searchParams.get('cursor')).toBe(cursorBefore);

    // Live again after the replay.
    const c3 = await callerApi.createCall({ calleeUserId: callee.userId });
    await c.rec.waitForEvents(6);
    // Nothing more: a barrier on the shard of each of the four calls (docs/architecture.md "Relays").
    const barriers = await barrier([c0.callId, c1.callId, c2.callId, c3.callId], [[callee.userId, [c.rec]]]);
    c.rec.expectClean();
    const got = c.rec.payloads(barriers);
    expect(got).toEqual([got[0], ...missed, got[5]]);
    expect(got[5]).toMatchObject({ type: 'call.invited', callId: c3.callId });
    // The failed attempts in between were abnormal closes (no server), not reported as events.
    expect(c.rec.closes.slice(1).every((x) => x.code === 1006)).toBe(true);
    expect(c.client.cursor).toBe(c.rec.cursor);
  }, 60_000);

  it('delivers each eventId once even when the server really sends it again (reconnect with an older cursor)', async () => {
    const caller = party(uid('caller'), uid('caller-phone'));
    const callee = party(uid('callee'), uid('callee-phone'));
    const callerApi = http(A, caller);
    const calleeApi = http(A, callee);
    const oldCursor = (await calleeApi.callEvents()).nextCursor;
    const cap = capturingWebSocket();

    // The first session token expires in a few seconds: the gateway closes with 4001 and the
    // client reconnects with a fresh token from the token function.
    let tokensIssued = 0;
    const token = () =>
      mintToken(TEST_JWT_SECRET, { sub: callee.userId, iid: callee.installationId, ttlSeconds: tokensIssued++ === 0 ? 4 : 3600 });
    const c = await online(A, callee, { WebSocket: cap.Ctor, token, cursor: oldCursor });

    const c1 = await callerApi.createCall({ calleeUserId: callee.userId });
    await callerApi.end(c1.callId, { reason: 'localHangup' });
    const c2 = await callerApi.createCall({ calleeUserId: callee.userId });
    await c.rec.waitForEvents(3);
    const firstThree = c.rec.payloads().map((e) => e.eventId);

    // The next connection asks for everything after the old cursor: the server replays the
    // three events the client already delivered.
    cap.rewind.cursor = oldCursor;
    await c.rec.until('the 4001 close and the reconnect', () => c.rec.reconnected(), 15_000);
    expect(c.rec.closes[0]).toEqual({ code: 4001, reason: 'token expired; reconnect with a fresh token and your cursor' });
    expect(tokensIssued).toBeGreaterThanOrEqual(2);
    expect(new URL(cap.opened[1]!).searchParams.get('cursor')).toBe(oldCursor);

    const c3 = await callerApi.createCall({ calleeUserId: callee.userId });
    await c.rec.waitForEvents(4);
    // Nothing more (no third copy either): a barrier on the shard of each call.
    const barriers = await barrier([c1.callId, c2.callId, c3.callId], [[callee.userId, [c.rec]]]);

    // The socket really received the first three twice from the log (and early once, too)…
    const received = cap.frames
      .map((f) => JSON.parse(f.data.toString('utf8')) as { type: string; cursor?: string; event?: EventPayload })
      .filter((f) => f.type === 'event' && f.cursor !== undefined)
      .map((f) => f.event!.eventId);
    for (const id of firstThree) expect(received.filter((r) => r === id), id).toHaveLength(2);
    // …and onEvent was called once per eventId, each call's events in order (calls on different
    // outbox shards may interleave: docs/architecture.md "Relays").
    c.rec.expectClean();
    const shape = c.rec.shape(barriers);
    expect([...shape].sort()).toEqual(
      [`call.invited/${c1.callId}`, `call.ended/${c1.callId}/callerCancelled`, `call.invited/${c2.callId}`, `call.invited/${c3.callId}`].sort(),
    );
    expect(shape.indexOf(`call.invited/${c1.callId}`)).toBeLessThan(shape.indexOf(`call.ended/${c1.callId}/callerCancelled`));
  }, 60_000);

  it('stop() during the reconnect backoff stops it for good', async () => {
    const callee = party(uid('callee'), uid('callee-phone'));
    const cap = capturingWebSocket();
    // Connections opened before stop(), once stopped.
    let openedAtStop: number | undefined;
    const c: { client: SignalingClient; rec: Recorder } = await online(B, callee, {
      WebSocket: cap.Ctor,
      // Every backoff of this client is at most 40 ms: shorter than the witness's below.
      maxBackoffMs: 40,
      onClose: (code, reason) => {
        c.rec.closes.push({ code, reason });
        // Stopped while a reconnect is scheduled: the close schedules it in microtasks, the
        // immediate runs after them, long before the timer (at least 20 ms) is due.
        if (c.rec.closes.length === 1)
          setImmediate(() => {
            openedAtStop = cap.opened.length;
            c.client.stop();
          });
      },
    });
    await B.stop();
    await c.rec.until('the 1001 close and stop()', () => openedAtStop !== undefined);
    expect(c.rec.closes[0]?.code).toBe(1001);
    B = await startB();

    // Barrier for "no reconnect came", without a quiet period: a witness client, started only
    // now, against a port where nothing listens. Its first retry waits at least 50 ms (its
    // minBackoffMs), longer than any backoff of c (40 ms at most), and was scheduled
    // after c's stop(); Node runs timers in the order they are due, so once the witness opens its
    // second socket, a reconnect of c that stop() failed to cancel has fired too, and its socket
    // (opened synchronously after the token, a string here) is in cap.opened.
    const witnessCap = capturingWebSocket();
    const witness = new SignalingClient({ url: `ws://127.0.0.1:${await freePort()}`, token: callee.token, WebSocket: witnessCap.Ctor, minBackoffMs: 50, maxBackoffMs: 60, onEvent: () => {} });
    clients.push(witness);
    const witnessStart = witness.start().catch((err: unknown) => err);
    await c.rec.until("the witness's retry", () => witnessCap.opened.length >= 2);
    witness.stop();
    expect(String(await witnessStart)).toMatch(/stopped before synced/);

    expect(cap.opened.length, `connections opened after stop(): ${JSON.stringify(cap.opened.slice(openedAtStop))}`).toBe(openedAtStop);
    const metrics = await (await fetch(`${B.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/^calling_ws_open_sockets\{encoding="json"\} 0$/m);
  }, 60_000);
});

describe('SignalingClient after a gateway crash (kill -9)', () => {
  it('reconnects with backoff, resumes from the cursor it saved, and fetches the in-call messages from the highest seq held without a gap', async () => {
    const caller = party(uid('caller'), uid('caller-phone'));
    const callee = party(uid('callee'), uid('callee-phone'));
    const callerApi = http(A, caller);
    const cap = capturingWebSocket();
    const saved: string[] = [];
    const messages: number[] = [];
    const c = await online(B, callee, {
      WebSocket: cap.Ctor,
      saveCursor: (cursor) => saved.push(cursor),
      onMessage: (m) => messages.push(m.seq),
    });
    // The callee's API client fetches missed messages for its signaling client; its GETs of
    // messages can be held, to let a later message arrive live before the fetch is answered.
    const gets: string[] = [];
    let hold: Promise<void> | undefined;
    let release!: () => void;
    const calleeApi = new CallingClient({
      baseUrl: A.url,
      token: callee.token,
      signaling: c.client,
      fetch: async (url: string, init: { method?: string }) => {
        if ((init.method ?? 'GET') === 'GET' && /\/messages\?/.test(url)) {
          gets.push(new URL(url).search);
          if (hold) await hold;
        }
        return fetch(url, init as RequestInit);
      },
    });
    expect(saved).toEqual([c.client.cursor]); // the first synced's cursor, saved though no event came

    const call = await callerApi.createCall({ calleeUserId: callee.userId });
    await c.rec.waitForEvents(1);
    await calleeApi.answer(call.callId, { installationId: callee.installationId });
    c.client.followMessages(call.callId);
    await callerApi.sendMessage(call.callId, { n: 1 });
    await c.rec.until('message 1', () => messages.length === 1);
    expect(c.client.heldMessageSeq(call.callId)).toBe(1);

    // The gateway crashes: no close frame (1006). Message 2 is sent while the callee is away.
    B.child.kill('SIGKILL');
    await c.rec.until('the 1006 close', () => c.rec.closes.length >= 1);
    expect(c.rec.closes[0]!.code).toBe(1006);
    await callerApi.sendMessage(call.callId, { n: 2 });
    // Message 2 is out before the gateway comes back: on a cluster the relay publishes it, a hop
    // later, and a gateway back by then would get it live instead of by the fetch.
    await relayDone(stack.redis, { prefix: 'cb', shards: DEFAULT_CALL_SHARDS }, [call.callId]);
    const cursorAtCrash = saved.at(-1)!;
    expect(c.client.cursor).toBe(cursorAtCrash);

    // The gateway comes back; the fetch after its `synced` is held until message 3 came live.
    hold = new Promise<void>((resolve) => (release = resolve));
    const getsBefore = gets.length;
    await B.stop().catch(() => {}); // reaped (it was killed)
    B = await startB();
    await c.rec.until('resynced', () => c.rec.reconnected());
    expect(new URL(cap.opened.at(-1)!).searchParams.get('cursor')).toBe(cursorAtCrash);
    await c.rec.until('the fetch after synced', () => gets.length > getsBefore);
    await callerApi.sendMessage(call.callId, { n: 3 });
    await c.rec.until('message 3, live', () => messages.includes(3));
    expect(c.client.heldMessageSeq(call.callId)).toBe(1); // 2 is missing: 3 is held past a gap
    release();
    await c.rec.until('message 2, fetched', () => messages.includes(2));

    // Asked from the highest seq held without a gap (1), not the highest held (3); 3 not handed on twice.
    expect(gets.slice(getsBefore)[0]).toBe('?afterSeq=1');
    expect(messages).toEqual([1, 3, 2]);
    expect(c.client.heldMessageSeq(call.callId)).toBe(3);
    // The cursors saved are the ones the client resumes from: the last is the client's own.
    expect(saved.at(-1)).toBe(c.client.cursor);

    // Hang-up: the call.ended event stops following the call's messages.
    await callerApi.end(call.callId, { reason: 'localHangup' });
    await c.rec.until('call.ended', () => c.rec.payloads().some((e) => e.type === 'call.ended'));
    expect(c.client.heldMessageSeq(call.callId)).toBeUndefined();
    c.rec.expectClean();
  }, 60_000);

  it('a gap frame\'s cursor is saved and resumed from', async () => {
    const callee = party(uid('callee'), uid('callee-phone'));
    const head = (await http(A, callee).callEvents()).nextCursor;
    // A cursor of another epoch of this user's log: the log was reset since (docs/signaling.md "Cursors").
    const stale = head.replace(/^[^_]+/, (epoch) => (epoch === '1' ? '2' : '1'));
    const saved: string[] = [];
    const c = await online(A, callee, { cursor: stale, saveCursor: (cursor) => saved.push(cursor) });
    expect(c.rec.gaps).toEqual(['reset']);
    expect(saved.length).toBeGreaterThanOrEqual(1);
    expect(saved.at(-1)).toBe(c.client.cursor);
    expect(saved).not.toContain(stale);
    // The saved cursor is one the server resumes from without a gap.
    const page = await http(A, callee).callEvents(saved.at(-1));
    expect(page.gap).toBeUndefined();
  });
});

describe('SignalingClient encodings', () => {
  it('msgpack frames decode to the same events as JSON', async () => {
    const caller = party(uid('caller'), uid('caller-phone'));
    const calleeId = uid('callee');
    const viaJson = party(calleeId, `${calleeId}-json`);
    const viaMsgpack = party(calleeId, `${calleeId}-msgpack`);
    const jsonCap = capturingWebSocket();
    const packCap = capturingWebSocket();
    const j = await online(A, viaJson, { WebSocket: jsonCap.Ctor });
    const m = await online(B, viaMsgpack, { WebSocket: packCap.Ctor, encoding: 'msgpack' });

    const callerApi = http(A, caller);
    const call = await callerApi.createCall({ calleeUserId: calleeId, video: false });
    await callerApi.rename(call.callId, { displayName: 'Renamed caller' });
    await callerApi.end(call.callId, { reason: 'localHangup' });
    await Promise.all([j.rec.waitForEvents(3), m.rec.waitForEvents(3)]);
    const barriers = await barrier([call.callId], [[calleeId, [j.rec, m.rec]]]);

    expect(m.rec.payloads(barriers)).toEqual(j.rec.payloads(barriers));
    expect(m.rec.shape(barriers)).toEqual([`call.invited/${call.callId}`, `call.renamed/${call.callId}`, `call.ended/${call.callId}/callerCancelled`]);
    m.rec.expectClean();
    // On the wire: binary frames for msgpack, text frames for JSON.
    expect(packCap.frames.length).toBeGreaterThanOrEqual(4);
    expect(packCap.frames.every((f) => f.isBinary)).toBe(true);
    expect(jsonCap.frames.every((f) => !f.isBinary)).toBe(true);
    // Both clients keep a cursor the HTTP log accepts.
    const page = await http(A, viaMsgpack).callEvents(m.client.cursor);
    expect(page.events).toEqual([]);
  });
});

describe('catching up over HTTP', () => {
  it('catchUp pages with limit=1 through a mixed log (entries for other installations) and loses no event', async () => {
    const caller = party(uid('caller'), uid('caller-phone'));
    const bobId = uid('bob');
    const phone = party(bobId, `${bobId}-phone`);
    const tablet = party(bobId, `${bobId}-tablet`);
    const callerApi = http(A, caller);
    const phoneApi = http(A, phone);
    const tabletApi = http(A, tablet);
    const start = (await phoneApi.callEvents()).nextCursor;

    // Call 1: the tablet answers (the phone is told answeredElsewhere, the tablet is not);
    // call 2: the phone answers, then hangs up; call 3: the caller cancels. The log holds entries
    // for one installation only (the tablet's call.accepted and ends), so some pages are empty.
    const c1 = await callerApi.createCall({ calleeUserId: bobId });
    await tabletApi.answer(c1.callId, { installationId: tablet.installationId });
    await tabletApi.end(c1.callId, { reason: 'localHangup' });
    const c2 = await callerApi.createCall({ calleeUserId: bobId });
    await phoneApi.answer(c2.callId, { installationId: phone.installationId });
    await phoneApi.end(c2.callId, { reason: 'localHangup' });
    // Call 2's answer is an entry for the tablet only. Calls may sit on different outbox shards, so
    // the test waits for it before call 3: an entry the phone does not see then lies before one it
    // does, and some page must come back empty with more after it.
    await waitUntil('the tablet told of call 2 answered elsewhere', async () => {
      const page = await tabletApi.callEvents(start, 500);
      return page.events.some((e) => e.callId === c2.callId && e.type === 'call.ended');
    }, WAIT_MS);
    const c3 = await callerApi.createCall({ calleeUserId: bobId });
    await callerApi.end(c3.callId, { reason: 'localHangup' });

    // The reference: the whole log in big pages, once the relay appended everything. The calls
    // may sit on different outbox shards, relayed independently: their events may interleave in
    // any order (docs/architecture.md "Relays"), each call's in its own order.
    const shape = (list: EventPayload[]) => list.map((e) => `${e.type}/${e.callId}${'reason' in e ? `/${e.reason}` : ''}`);
    const expected = [
      [`call.invited/${c1.callId}`, `call.ended/${c1.callId}/answeredElsewhere`],
      [`call.invited/${c2.callId}`],
      [`call.invited/${c3.callId}`, `call.ended/${c3.callId}/callerCancelled`],
    ];
    const perCall = (list: EventPayload[]) => [c1, c2, c3].map((c) => shape(list.filter((e) => e.callId === c.callId)));
    let reference: EventPayload[] = [];
    const complete = async () => {
      reference = [];
      const whole = await http(A, phone).catchUp(start, { onEvent: (e) => reference.push(e) }, { limit: 500 });
      expect(whole.delivered).toBe(reference.length);
      return reference.length >= expected.flat().length;
    };
    await waitUntil('the whole log', complete, WAIT_MS, { intervalMs: 50, detail: () => JSON.stringify(shape(reference)) });
    expect(perCall(reference)).toEqual(expected);
    expect(reference).toHaveLength(expected.flat().length);

    // Page by page with limit=1, recording what the server said.
    const pages: CallEventsPage[] = [];
    const recording = new CallingClient({
      baseUrl: A.url,
      token: phone.token,
      fetch: async (url: string, init: RequestInit) => {
        const res = await fetch(url, init);
        if (url.includes('/v1/call-events')) pages.push((await res.clone().json()) as CallEventsPage);
        return res;
      },
    });
    const paged: EventPayload[] = [];
    const result = await recording.catchUp(start, { onEvent: (e) => paged.push(e) }, { limit: 1 });
    expect(paged).toEqual(reference);
    expect(result.delivered).toBe(reference.length);
    // Empty pages with more after them happened, and only the last page said no more.
    expect(pages.some((p) => p.events.length === 0 && p.hasMore)).toBe(true);
    expect(pages.map((p) => p.hasMore)).toEqual([...pages.slice(1).map(() => true), false]);
    expect(pages.every((p) => p.events.length <= 1)).toBe(true);
    expect(result.cursor).toBe(pages.at(-1)!.nextCursor);
    // From the returned cursor nothing more, and the flag says so.
    expect(await phoneApi.callEvents(result.cursor, 1)).toEqual({ events: [], nextCursor: result.cursor, hasMore: false });
  });
});

describe('SignalingClient and the session token', () => {
  it('on Node with an injected WebSocket class the token travels in a header, not in the URL', async () => {
    const p = party(uid('user'), uid('inst'));
    const cap = capturingWebSocket();
    const c = await online(A, p, { WebSocket: cap.Ctor });
    expect(c.rec.synced.length).toBeGreaterThan(0);
    expect(cap.opened).toHaveLength(1);
    expect(new URL(cap.opened[0]!).searchParams.has('access_token')).toBe(false);
    expect(cap.opened[0]).not.toContain(p.token);
  });

  it('a refused token stops the client: start() rejects, one connection only, the callback is asked once', async () => {
    const p = party(uid('user'), uid('inst'));
    const bad = mintToken('another-secret-0123456789abcdef-0123456789', { sub: p.userId, iid: p.installationId });
    const cap = capturingWebSocket();
    const failures: AuthFailure[] = [];
    const client = new SignalingClient({
      url: wsUrl(A),
      token: bad,
      WebSocket: cap.Ctor,
      maxBackoffMs: 50,
      onEvent: () => {},
      onAuthFailure: (f) => {
        failures.push(f);
        return undefined;
      },
    });
    expect(await authFailureOf(client)).toEqual({ status: 401, detail: 'upgrade answered 401' });
    expect(failures).toEqual([{ status: 401, detail: 'upgrade answered 401' }]);
    // A barrier: a good client connects and syncs on the same server after the refusal; the
    // stopped client opened nothing more meanwhile.
    await online(A, party(uid('user'), uid('inst')));
    expect(cap.opened).toHaveLength(1);
  });

  it('in a browser (status hidden, token in the URL) a refused token is recognised by one HTTP check', async () => {
    const p = party(uid('user'), uid('inst'));
    const bad = mintToken('another-secret-0123456789abcdef-0123456789', { sub: p.userId, iid: p.installationId });
    const cap = capturingWebSocket();
    /** Like a browser's WebSocket: a refused upgrade is a bare error and a 1006 close. */
    const real = Object.getOwnPropertyDescriptor(WebSocket.prototype, 'onerror')!;
    class BrowserLike extends (cap.Ctor as unknown as typeof WebSocket) {
      constructor(url: string, protocols?: string | string[], options?: WebSocket.ClientOptions) {
        super(url, protocols, options);
        Object.defineProperty(this, 'onerror', {
          set: (fn: ((ev: unknown) => void) | null) => real.set!.call(this, fn ? () => fn({ type: 'error' }) : null),
          get: () => real.get!.call(this) as unknown,
        });
      }
    }
    const client = new SignalingClient({ url: wsUrl(A), token: bad, WebSocket: BrowserLike as Ctor, tokenIn: 'query', onEvent: () => {} });
    expect(await authFailureOf(client)).toEqual({ status: 401, detail: 'token check answered 401' });
    expect(new URL(cap.opened[0]!).searchParams.get('access_token')).toBe(bad);
    expect(cap.opened).toHaveLength(1);
  });

  it('an expired fixed token (4001) asks the callback, which gives a fresh one: it resumes from its cursor', async () => {
    const caller = party(uid('caller'), uid('caller-phone'));
    const callee = party(uid('callee'), uid('callee-phone'));
    const short = mintToken(TEST_JWT_SECRET, { sub: callee.userId, iid: callee.installationId, ttlSeconds: 6 });
    const failures: AuthFailure[] = [];
    const cap = capturingWebSocket();
    const c = await online(A, callee, {
      WebSocket: cap.Ctor,
      token: short,
      onAuthFailure: (f) => {
        failures.push(f);
        return callee.token;
      },
    });
    const call = await http(A, caller).createCall({ calleeUserId: callee.userId });
    await c.rec.waitForEvents(1);
    // The invitation's copy from the log too (an early copy can come first), long before the token expires.
    await c.rec.until('the cursor past the invitation', () => c.client.cursor === cap.logCursorOf(c.rec.events[0]!.event.eventId));
    await c.rec.until('the 4001 close and the resync', () => c.rec.reconnected(), 15_000);
    expect(failures).toEqual([{ status: 401, detail: 'closed 4001: token expired; reconnect with a fresh token and your cursor' }]);
    expect(new URL(cap.opened[1]!).searchParams.get('cursor')).toBe(cap.logCursorOf(c.rec.events[0]!.event.eventId));
    await http(A, caller).end(call.callId, { reason: 'localHangup' });
    await c.rec.waitForEvents(2);
    expect(c.rec.shape()).toEqual([`call.invited/${call.callId}`, `call.ended/${call.callId}/callerCancelled`]);
    c.rec.expectClean();
  }, 30_000);

  it('start() settles: it rejects when stop() comes first, and when no server answers within startTimeoutMs', async () => {
    const p = party(uid('user'), uid('inst'));
    const early = new SignalingClient({ url: wsUrl(A), token: p.token, WebSocket, onEvent: () => {} });
    const started = early.start();
    early.stop();
    await expect(started).rejects.toThrow('stopped before synced');

    const nowhere = await freePort();
    const lonely = new SignalingClient({ url: `ws://127.0.0.1:${nowhere}`, token: p.token, WebSocket, maxBackoffMs: 100, startTimeoutMs: 1500, onEvent: () => {} });
    clients.push(lonely);
    await expect(lonely.start()).rejects.toThrow('not synced within 1500 ms');
  });
});
