import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { device, relayDone, sameShardCallId, type Device } from '../support/fixtures.js';
import { api, type ApiResponse } from '../support/http.js';
import { REPO_ROOT } from '../support/server.js';
import { forFile, ON_CLUSTER } from '../support/stack.js';
import { waitUntil } from '../support/wait.js';
import { connect, type EventFrame, type Frame, type SignalingClient } from '../support/ws-client.js';
import { hmacMatches, newSecret, startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from '../support/webhook-receiver.js';
import { Normaliser, readGolden, serializeSection, writeGolden, type Ctx, type GoldenRecord } from '../support/golden.js';
import { newServerKey } from '../../src/auth/serverKeys.js';
import { pushesSettled, registerAndroid, registerIos, startPushStack, type PushStack, type TokenKind } from './push-helpers.js';
import type { ApnsRecordedRequest } from '../support/apns-server.js';
import type { FcmRecordedMessage } from '../support/fcm-server.js';

/**
 * The one-to-one wire format, recorded (issue #45: "a golden test of every one-to-one body,
 * recorded before the change"). Each path drives a real server through one one-to-one call and
 * records every body a party or the app's backend can see: HTTP replies (and the `reply` frames
 * of socket commands), each installation's socket frames live and as replayed by cursor, its
 * `GET /v1/call-events` pages, the pushes as the fake APNs and FCM received them, the webhooks, the
 * history and the server API's reads. What varies between runs is replaced by placeholders
 * (test/support/golden.ts); the rest must match test/fixtures/golden/one-to-one.json byte for
 * byte. `UPDATE_GOLDEN=1` records the file again.
 *
 * The parties: alice calls from alice-phone (A1, Android) and also has alice-tablet (A2, iOS);
 * bob has bob-phone (B1, iOS) and bob-tablet (B2, Android). All four are online on signaling.
 */

const GOLDEN_PATH = join(REPO_ROOT, 'test/fixtures/golden/one-to-one.json');
const UPDATE = process.env.UPDATE_GOLDEN === '1';
/** The ring window of the api-only process the unanswered path creates its call on. */
const SHORT_RING_MS = 3000;
const KS = { prefix: 'cb', shards: 8 };

const serverKey = newServerKey();
const hookSecret = newSecret();
let ps: PushStack;
let url: string;
let shortUrl: string;
let hooks: WebhookReceiver;

forFile(
  async () => {
    hooks = await startWebhookReceiver([hookSecret]);
    // One webhook entry at a time per partition: a later call's webhook in the same shard is a
    // barrier for an earlier one's (docs/webhooks.md "Delivery").
    const stack = await startPushStack({
      WEBHOOKS: JSON.stringify([{ id: 'main', url: hooks.url, secret: hookSecret }]),
      WEBHOOK_CONCURRENCY: '1',
      SERVER_API_KEYS: serverKey.hash,
    });
    const short = await stack.stack.addServer({ ROLES: 'api', RING_TIMEOUT_MS: String(SHORT_RING_MS) });
    return {
      stack,
      short,
      async stop() {
        await stack.stop();
        await hooks.close();
      },
    };
  },
  (s) => {
    ps = s.stack;
    url = ps.url;
    shortUrl = s.short.url;
  },
);

const backend = () => api(url, serverKey.key);

/** Deterministic push tokens, so that every run registers the same ones. */
const iosTokenOf = (seed: string): string => createHash('sha256').update(seed).digest('hex');
const androidTokenOf = (seed: string): string => `${createHash('sha256').update(`i:${seed}`).digest('base64url').slice(0, 11)}:APA91b${createHash('sha256').update(seed).digest('base64url')}`;

type Label = 'A1' | 'A2' | 'B1' | 'B2';

interface Party {
  label: Label;
  d: Device;
  kind: TokenKind;
  token: string;
  ws?: SignalingClient;
  /** The head of the installation's log when it connected (the live socket's `synced` cursor). */
  head?: string;
}

/** Every recorded body of one path, in the order they are recorded, with the context for their times. */
class PathRecorder {
  readonly raw: { at: string; body: unknown; ctx?: Ctx }[] = [];
  readonly parties: Record<Label, Party>;
  readonly alice: string;
  readonly bob: string;
  /** The in-call messages each installation is sent (delivered live only, outside the log). */
  readonly messagesTo: Partial<Record<Label, number>> = {};

  /** The path's name as it goes into ids (userIds, operationIds). */
  readonly slug: string;

  constructor(readonly name: string) {
    this.slug = name.replace(/[^A-Za-z0-9]+/g, '-').replace(/-$/, '');
    this.alice = `alice.${this.slug}`;
    this.bob = `bob.${this.slug}`;
    const party = (label: Label, userId: string, inst: string, kind: TokenKind, displayName: string): Party => {
      const token = kind === 'iosVoip' ? iosTokenOf(`${this.slug}/${inst}`) : androidTokenOf(`${this.slug}/${inst}`);
      return { label, d: device(url, userId, inst, displayName), kind, token };
    };
    this.parties = {
      A1: party('A1', this.alice, 'alice-phone', 'androidPush', 'Alice'),
      A2: party('A2', this.alice, 'alice-tablet', 'iosVoip', 'Alice'),
      B1: party('B1', this.bob, 'bob-phone', 'iosVoip', 'Bob'),
      B2: party('B2', this.bob, 'bob-tablet', 'androidPush', 'Bob'),
    };
  }

  get all(): Party[] {
    return Object.values(this.parties);
  }

  record(at: string, body: unknown, ctx?: Ctx): void {
    this.raw.push({ at, body, ...(ctx ? { ctx } : {}) });
  }

  /** An HTTP reply: its status, content type and body (checked to be compact JSON as parsed, so the record keeps every byte). */
  http(at: string, res: ApiResponse, ctx?: Ctx): ApiResponse {
    if (res.json !== undefined) expect(JSON.stringify(res.json), `${at}: the body is compact JSON`).toBe(res.text);
    // Every request of the paths succeeds but the answer that loses (labelled so).
    if (!at.includes('(lost)')) expect(res.status, `${at}: ${res.text}`).toBeLessThan(300);
    this.record(`${at} → ${res.status} ${res.headers.get('content-type') ?? ''}`, res.json ?? res.text, ctx);
    return res;
  }

  /** Registers every party's push token and connects its socket (recording the `synced` frame). */
  async online(): Promise<void> {
    for (const p of this.all) {
      await (p.kind === 'iosVoip' ? registerIos(p.d, p.token) : registerAndroid(p.d, p.token));
    }
    for (const p of this.all) {
      p.ws = await connect(url, p.d.token, { name: `${this.name}/${p.label}` });
      const synced = p.ws.frames[0]!;
      expect(synced.type).toBe('synced');
      p.head = synced.cursor as string;
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.all.map((p) => p.ws?.close()));
  }

  /** Placeholders for the tokens and the fake FCM's project. */
  names(): Map<string, string> {
    const m = new Map<string, string>();
    for (const p of this.all) m.set(p.token, `<${p.kind} token of ${p.label}>`);
    m.set(ps.fcm.projectId, '<fcm project>');
    return m;
  }

  normalised(): GoldenRecord[] {
    const n = new Normaliser(this.names());
    return this.raw.map((r) => ({ at: r.at, body: n.normalise(r.body, r.ctx ?? {}) }));
  }
}

/** Frames decoded as sent: every frame of the socket is compact JSON that parses back to itself. */
function expectCompactFrames(ws: SignalingClient): void {
  expect(ws.undecodable()).toEqual([]);
  expect(ws.raw.length).toBe(ws.frames.length);
  ws.raw.forEach((r, i) => expect(JSON.stringify(ws.frames[i]), `${ws.name} frame ${i}`).toBe(r.data.toString('utf8')));
}

const isCallFrame = (callId: string) => (f: Frame) => (f.type === 'event' || f.type === 'message') && (f.event as { callId?: string } | undefined)?.callId === callId;

const apnsPayload = (r: ApnsRecordedRequest): Record<string, any> => (r.body as Record<string, any>)?.callpayload ?? {};
const fcmPayload = (m: FcmRecordedMessage): Record<string, any> => JSON.parse((m.body as any).message.data.callpayload as string);

/** Waits until B1 (APNs) and B2 (FCM) have the call's invitation. */
async function invitationsPushed(rec: PathRecorder, callId: string): Promise<void> {
  const { B1, B2 } = rec.parties;
  await waitUntil(`the invitations of ${callId}`, () =>
    ps.apns.requests.some((r) => r.token === B1.token && apnsPayload(r).callId === callId) &&
    ps.fcm.messages.some((m) => m.token === B2.token && fcmPayload(m).callId === callId && fcmPayload(m).type === 'call.invited'),
  );
}

/**
 * Everything that follows from the path's changes, recorded once it has all arrived: the relay is
 * done and no push is pending (pushesSettled), the log replayed by cursor is then complete and each
 * live socket must have exactly its events; the webhooks are proven complete by a later call's in
 * the same shard (one delivery at a time per partition).
 */
async function settleAndRecord(rec: PathRecorder, callId: string, webhookTypes: string[]): Promise<void> {
  await pushesSettled(ps, [callId]);

  // Sockets: the log replayed from the head each live socket started at, then the live frames.
  for (const p of rec.all) {
    const replay = await connect(url, p.d.token, { cursor: p.head!, name: `${rec.name}/${p.label} replay` });
    try {
      expectCompactFrames(replay);
      // The first `synced` answers the resume. On a cluster the gateway may send another one later,
      // when ioredis re-subscribes and the socket's log is read again (docs/signaling.md): that is
      // the resync, not part of a body, and how often it comes depends on the cluster's timing.
      const firstSynced = replay.frames.find((f) => f.type === 'synced');
      const replayed = replay.frames.filter((f) => isCallFrame(callId)(f) || f === firstSynced || f.type === 'gap');
      const logged = replayed.filter((f) => f.type === 'event') as EventFrame[];
      const ws = p.ws!;
      const liveLogged = () => ws.eventFrames().filter((f) => f.event.callId === callId);
      await ws.until(() => liveLogged().length >= logged.length, 5000, `${logged.length} events of ${callId}`);
      const messages = rec.messagesTo[p.label] ?? 0;
      await ws.until(() => ws.frames.filter((f) => f.type === 'message' && isCallFrame(callId)(f)).length >= messages, 5000, `${messages} in-call messages`);
      expectCompactFrames(ws);
      rec.record(`${p.label} live socket`, ws.frames[0]);
      for (const f of ws.frames.filter((f) => f.type === 'event' && f.cursor !== undefined && isCallFrame(callId)(f))) rec.record(`${p.label} live socket`, f);
      for (const f of ws.frames.filter((f) => f.type === 'message' && isCallFrame(callId)(f))) rec.record(`${p.label} live socket (in-call messages)`, f);
      for (const f of replayed) rec.record(`${p.label} replay socket (cursor: its live socket's first synced)`, f);
      // Early copies (single Redis only): the log's copy, byte for byte, in the same envelope without a cursor.
      const early = ws.frames.filter((f) => f.type === 'event' && f.cursor === undefined && isCallFrame(callId)(f)) as EventFrame[];
      if (ON_CLUSTER) expect(early).toEqual([]);
      for (const e of early) {
        const copy = liveLogged().find((f) => f.event.eventId === e.event.eventId);
        expect(copy, `${p.label}: the log's copy of early ${e.event.eventId}`).toBeDefined();
        expect(JSON.stringify(e)).toBe(JSON.stringify({ type: 'event', event: copy!.event }));
      }
      // HTTP catch-up from the same cursor.
      const page = rec.http(`${p.label} GET /v1/call-events?cursor=<its live socket's first synced>`, await p.d.api.get(`/v1/call-events?cursor=${encodeURIComponent(p.head!)}`));
      expect(page.status).toBe(200);
      expect(page.json.hasMore).toBe(false);
    } finally {
      await replay.close();
    }
  }

  // Pushes, per receiving installation in arrival order.
  for (const p of rec.all) {
    if (p.kind === 'iosVoip') {
      for (const r of ps.apns.requests.filter((r) => r.token === p.token && apnsPayload(r).callId === callId)) {
        expect(r.status).toBe(200);
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(r.headers)) if (k.startsWith('apns-')) headers[k] = v;
        expect(r.headers.authorization).toMatch(/^bearer [A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
        headers.authorization = 'bearer <provider JWT>';
        rec.record(`APNs → ${p.label}`, { method: r.method, path: r.path, headers, body: r.body }, { push: true });
      }
      expect(ps.apnsSandbox.requests.filter((r) => r.token === p.token)).toEqual([]);
    } else {
      // A missed-call alert goes out in the same attempt as the end's signal, so the two may arrive
      // in either order: the alert is recorded last.
      const last = (m: FcmRecordedMessage) => (fcmPayload(m).type === 'call.missed' ? 1 : 0);
      for (const m of ps.fcm.messages.filter((m) => m.token === p.token && fcmPayload(m).callId === callId).sort((a, b) => last(a) - last(b))) {
        expect(m.status).toBe(200);
        const body = structuredClone(m.body) as any;
        const payload = body.message.data.callpayload as string;
        expect(JSON.stringify(JSON.parse(payload)), 'callpayload is compact JSON').toBe(payload);
        const ttl = /^([1-9]\d*)s$/.exec(body.message.android.ttl as string);
        expect(ttl, body.message.android.ttl).not.toBeNull();
        // Whole seconds left: of the ring window for an invitation, of a missed-call alert's day
        // (docs/protocol.md "Missed-call alerts"), of the signal's minute otherwise.
        const alert = fcmPayload(m).type === 'call.missed';
        const bound = body.message.android.priority === 'HIGH' ? Math.floor((Number(fcmPayload(m).expiresAtMs) - fcmPayload(m).issuedAtMs) / 1000) : alert ? 86_400 : 60;
        expect(Number(ttl![1])).toBeLessThanOrEqual(bound);
        expect(Number(ttl![1])).toBeGreaterThanOrEqual(Math.max(1, bound - 10));
        body.message.android.ttl = `<whole seconds ≤ ${body.message.android.priority === 'HIGH' ? 'expiresAt' : alert ? 'the alert lifetime' : '60'}>`;
        expect(m.headers.authorization).toMatch(/^Bearer \S+$/);
        expect(m.headers['content-type']).toBe('application/json');
        rec.record(`FCM → ${p.label}`, { method: m.method, path: m.path, headers: { authorization: 'Bearer <access token>', 'content-type': m.headers['content-type'] }, body }, { push: true });
      }
    }
  }

  // Webhooks: every type expected, then a barrier call in the same shard proves nothing else came.
  const ofCall = () => [...hooks.unique().values()].filter((w) => w.json?.data?.callId === callId);
  await waitUntil(`webhooks ${webhookTypes.join(', ')} of ${callId}`, () => webhookTypes.every((t) => ofCall().some((w) => w.json.type === t)), 10_000);
  const barrier = sameShardCallId(callId);
  const bc = device(url, `barrier.${rec.slug}.caller`);
  expect((await bc.api.post('/v1/calls', { callId: barrier, calleeUserId: `barrier.${rec.slug}.callee`, operationId: `op-${barrier}` })).status).toBe(201);
  expect((await bc.api.post(`/v1/calls/${barrier}/end`, { operationId: `op-end-${barrier}`, reason: 'localHangup' })).status).toBe(200);
  await waitUntil('the barrier call.ended webhook', () => [...hooks.unique().values()].some((w) => w.json?.type === 'call.ended' && w.json?.data?.callId === barrier), 10_000);
  const received = hooks.received.filter((w) => w.json?.data?.callId === callId);
  expect(received.map((w) => w.id)).toEqual(ofCall().map((w) => w.id)); // every one answered 204 at once: no retry
  // Deliveries gathered into one stream entry go out in parallel: sorted by type, as the call made them.
  const order = ['call.created', 'call.accepted', 'call.ended'];
  const rank = (w: ReceivedWebhook) => (order.includes(w.json.type) ? order.indexOf(w.json.type) : order.length);
  for (const w of ofCall().sort((a, b) => rank(a) - rank(b))) rec.record('webhook main', webhookRecord(w));
}

function webhookRecord(w: ReceivedWebhook): unknown {
  expect(hmacMatches(hookSecret, w)).toBe(true);
  expect(Math.abs(Number(w.timestamp) - w.atMs / 1000)).toBeLessThan(60);
  expect(w.signature).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
  const body = JSON.parse(w.body) as unknown;
  expect(JSON.stringify(body), 'webhook body is compact JSON').toBe(w.body);
  return { headers: { 'webhook-id': w.id, 'webhook-timestamp': '<unix seconds of the attempt>', 'webhook-signature': 'v1,<HMAC-SHA256>' }, body };
}

/** History and the server API's reads once the call has ended and been relayed. */
async function recordAfterEnd(rec: PathRecorder, callId: string): Promise<void> {
  const { A1, B1 } = rec.parties;
  rec.http('A1 GET /v1/calls (history)', await A1.d.api.get('/v1/calls'));
  rec.http('B1 GET /v1/calls (history)', await B1.d.api.get('/v1/calls'));
  rec.http('B1 GET /v1/calls?missed=true (history)', await B1.d.api.get('/v1/calls?missed=true'));
  rec.http('backend GET /v1/server/calls/{id}', await backend().get(`/v1/server/calls/${callId}`));
  rec.http('backend GET /v1/server/users/{alice}/calls', await backend().get(`/v1/server/users/${rec.alice}/calls`));
  rec.http('backend GET /v1/server/users/{bob}/calls', await backend().get(`/v1/server/users/${rec.bob}/calls`));
  rec.http('backend GET /v1/server/users/{alice}/calls/active', await backend().get(`/v1/server/users/${rec.alice}/calls/active`));
}

async function snapshots(rec: PathRecorder, callId: string, state: string, who: Label[] = ['A1', 'B1']): Promise<void> {
  for (const l of who) {
    const res = rec.http(`${l} GET /v1/calls/{id} (${state})`, await rec.parties[l].d.api.get(`/v1/calls/${callId}`));
    expect(res.json.state).toBe(state);
  }
}

function create(rec: PathRecorder, callId: string, extra: Record<string, unknown> = {}, via = url): Promise<ApiResponse> {
  return api(via, rec.parties.A1.d.token).post('/v1/calls', { callId, calleeUserId: rec.bob, operationId: `op-create-${callId}`, ...extra });
}

function op(rec: PathRecorder, what: string): string {
  return `op-${rec.slug}-${what}`;
}

// ---------------------------------------------------------------------------------------------

const golden = UPDATE ? undefined : readGolden(GOLDEN_PATH);
const recorded: Record<string, GoldenRecord[]> = {};

/** One path: runs `drive`, then compares (or records) its section. */
function path(name: string, drive: (rec: PathRecorder) => Promise<void>): void {
  it(name, async () => {
    const rec = new PathRecorder(name);
    try {
      await drive(rec);
    } finally {
      await rec.close();
    }
    const records = rec.normalised();
    recorded[name] = records;
    if (UPDATE) return;
    expect(golden, `${GOLDEN_PATH} is missing: record it with UPDATE_GOLDEN=1`).toBeDefined();
    expect(serializeSection(records), `${name}: the one-to-one wire bodies differ from ${GOLDEN_PATH}`).toBe(golden![name] ?? '(no such section in the golden file)');
  });
}

const PATHS = [
  'answered, caller hangs up',
  'answered by socket commands, callee hangs up',
  'declined',
  'caller cancelled',
  'unanswered (ring timeout)',
  'busy',
  'renamed while ringing and while accepted',
  'answered on a second installation',
  'ringing, ended by the server API',
  'accepted, ended by the server API',
] as const;

afterAll(() => {
  if (!UPDATE) return;
  const missing = PATHS.filter((p) => !recorded[p]);
  if (missing.length > 0) throw new Error(`not recording ${GOLDEN_PATH}: paths did not finish: ${missing.join(', ')}`);
  writeGolden(GOLDEN_PATH, Object.fromEntries(PATHS.map((p) => [p, recorded[p]!])));
});

describe('one-to-one wire bodies, as recorded in test/fixtures/golden/one-to-one.json', () => {
  path('answered, caller hangs up', async (rec) => {
    const callId = 'call-answered-caller-hangs-up';
    const { A1, B1 } = rec.parties;
    await rec.online();
    rec.http('A1 POST /v1/calls', await create(rec, callId, { video: true }));
    await invitationsPushed(rec, callId);
    await snapshots(rec, callId, 'ringing');
    rec.http('B1 POST /v1/calls/{id}/ringing', await B1.d.api.post(`/v1/calls/${callId}/ringing`, { operationId: op(rec, 'ringing'), via: 'apns' }));
    rec.http('backend GET /v1/server/calls/{id} (ringing)', await backend().get(`/v1/server/calls/${callId}`));
    rec.http('B1 POST /v1/calls/{id}/answer', await B1.d.api.post(`/v1/calls/${callId}/answer`, { operationId: op(rec, 'answer'), installationId: B1.d.installationId }));
    await snapshots(rec, callId, 'accepted');
    rec.http('backend GET /v1/server/calls/{id} (accepted)', await backend().get(`/v1/server/calls/${callId}`));
    await relayDone(ps.stack.redis, KS, [callId]);
    rec.http('backend GET /v1/server/users/{alice}/calls/active (accepted)', await backend().get(`/v1/server/users/${rec.alice}/calls/active`));
    rec.http('A1 POST /v1/calls/{id}/media-session', await A1.d.api.post(`/v1/calls/${callId}/media-session`, {}), { media: true });
    Object.assign(rec.messagesTo, { A1: 1, B1: 1 });
    rec.http('A1 POST /v1/calls/{id}/messages', await A1.d.api.post(`/v1/calls/${callId}/messages`, { operationId: op(rec, 'msg-a'), payload: { kind: 'offer', sdp: 'v=0 offer' } }));
    rec.http('B1 POST /v1/calls/{id}/messages', await B1.d.api.post(`/v1/calls/${callId}/messages`, { operationId: op(rec, 'msg-b'), payload: { kind: 'answer', sdp: 'v=0 answer' } }));
    rec.http('B1 GET /v1/calls/{id}/messages?afterSeq=0', await B1.d.api.get(`/v1/calls/${callId}/messages?afterSeq=0`));
    rec.http('A1 GET /v1/calls/{id}/messages?afterSeq=0', await A1.d.api.get(`/v1/calls/${callId}/messages?afterSeq=0`));
    rec.http('A1 POST /v1/calls/{id}/end localHangup', await A1.d.api.post(`/v1/calls/${callId}/end`, { operationId: op(rec, 'end'), reason: 'localHangup' }));
    await snapshots(rec, callId, 'ended');
    await settleAndRecord(rec, callId, ['call.created', 'call.accepted', 'call.ended']);
    await recordAfterEnd(rec, callId);
  });

  path('answered by socket commands, callee hangs up', async (rec) => {
    const callId = 'call-answered-callee-hangs-up';
    const { B1 } = rec.parties;
    await rec.online();
    rec.http('A1 POST /v1/calls', await create(rec, callId));
    await invitationsPushed(rec, callId);
    rec.messagesTo.A1 = 1;
    const cmd = async (label: string, frame: Record<string, unknown> & { type: string; operationId: string }) => rec.record(`B1 socket command ${label} → reply`, await B1.ws!.command({ callId, ...frame }));
    await cmd('ringing', { type: 'ringing', operationId: op(rec, 'ringing'), via: 'socket' });
    await cmd('answer', { type: 'answer', operationId: op(rec, 'answer'), installationId: B1.d.installationId });
    await cmd('message', { type: 'message', operationId: op(rec, 'msg-b'), payload: { kind: 'candidate', candidate: 'candidate:1 1 udp 1 127.0.0.1 9 typ host' } });
    await cmd('end localHangup', { type: 'end', operationId: op(rec, 'end'), reason: 'localHangup' });
    await snapshots(rec, callId, 'ended');
    await settleAndRecord(rec, callId, ['call.created', 'call.accepted', 'call.ended']);
    await recordAfterEnd(rec, callId);
  });

  path('declined', async (rec) => {
    const callId = 'call-declined';
    const { B1 } = rec.parties;
    await rec.online();
    rec.http('A1 POST /v1/calls', await create(rec, callId));
    await invitationsPushed(rec, callId);
    rec.http('B1 POST /v1/calls/{id}/end declined', await B1.d.api.post(`/v1/calls/${callId}/end`, { operationId: op(rec, 'end'), reason: 'declined' }));
    await snapshots(rec, callId, 'ended', ['A1', 'B1', 'B2']);
    await settleAndRecord(rec, callId, ['call.created', 'call.ended']);
    await recordAfterEnd(rec, callId);
  });

  path('caller cancelled', async (rec) => {
    const callId = 'call-caller-cancelled';
    const { A1 } = rec.parties;
    await rec.online();
    rec.http('A1 POST /v1/calls', await create(rec, callId));
    await invitationsPushed(rec, callId);
    rec.http('A1 POST /v1/calls/{id}/end localHangup', await A1.d.api.post(`/v1/calls/${callId}/end`, { operationId: op(rec, 'end'), reason: 'localHangup' }));
    await snapshots(rec, callId, 'ended');
    await settleAndRecord(rec, callId, ['call.created', 'call.ended']);
    await recordAfterEnd(rec, callId);
  });

  path('unanswered (ring timeout)', async (rec) => {
    const callId = 'call-unanswered';
    const { A1 } = rec.parties;
    await rec.online();
    rec.http(`A1 POST /v1/calls (RING_TIMEOUT_MS=${SHORT_RING_MS})`, await create(rec, callId, {}, shortUrl));
    await invitationsPushed(rec, callId);
    // The ring sweep ends it (no request of ours may end it lazily first): the caller is told.
    await A1.ws!.until(() => A1.ws!.eventFrames().some((f) => f.event.callId === callId && f.event.type === 'call.ended'), SHORT_RING_MS + 10_000, 'the ring timeout');
    await snapshots(rec, callId, 'ended');
    await settleAndRecord(rec, callId, ['call.created', 'call.ended']);
    await recordAfterEnd(rec, callId);
  });

  path('busy', async (rec) => {
    const callId = 'call-busy';
    const { B1 } = rec.parties;
    // bob is in an accepted call with carol (CALL_WAITING is off by default: docs/api.md "Busy and call waiting").
    const carol = device(url, `carol.${rec.slug}`, 'carol-phone', 'Carol');
    const setup = 'call-busy-setup';
    expect((await carol.api.post('/v1/calls', { callId: setup, calleeUserId: rec.bob, operationId: `op-${setup}` })).status).toBe(201);
    expect((await B1.d.api.post(`/v1/calls/${setup}/answer`, { operationId: `op-answer-${setup}`, installationId: B1.d.installationId })).status).toBe(200);
    // The busy marker is the relay's (docs/api.md "Busy and call waiting").
    await pushesSettled(ps, [setup]);
    await rec.online();
    const created = rec.http('A1 POST /v1/calls', await create(rec, callId));
    expect(created.json.endReason).toBe('busy');
    await snapshots(rec, callId, 'ended');
    await settleAndRecord(rec, callId, ['call.ended']);
    await recordAfterEnd(rec, callId);
    expect((await carol.api.post(`/v1/calls/${setup}/end`, { operationId: `op-end-${setup}`, reason: 'localHangup' })).status).toBe(200);
  });

  path('renamed while ringing and while accepted', async (rec) => {
    const callId = 'call-renamed';
    const { A1, B1 } = rec.parties;
    await rec.online();
    rec.http('A1 POST /v1/calls', await create(rec, callId));
    await invitationsPushed(rec, callId);
    rec.http('A1 POST /v1/calls/{id}/rename (ringing)', await A1.d.api.post(`/v1/calls/${callId}/rename`, { operationId: op(rec, 'rename-1'), displayName: 'Alice (work)' }));
    rec.http('B1 POST /v1/calls/{id}/answer', await B1.d.api.post(`/v1/calls/${callId}/answer`, { operationId: op(rec, 'answer'), installationId: B1.d.installationId }));
    rec.http('A1 POST /v1/calls/{id}/rename (accepted)', await A1.d.api.post(`/v1/calls/${callId}/rename`, { operationId: op(rec, 'rename-2'), displayName: 'Alice W. 📞' }));
    rec.http('A1 POST /v1/calls/{id}/rename (same name again)', await A1.d.api.post(`/v1/calls/${callId}/rename`, { operationId: op(rec, 'rename-3'), displayName: 'Alice W. 📞' }));
    await snapshots(rec, callId, 'accepted');
    rec.http('A1 POST /v1/calls/{id}/end localHangup', await A1.d.api.post(`/v1/calls/${callId}/end`, { operationId: op(rec, 'end'), reason: 'localHangup' }));
    rec.http('A1 POST /v1/calls/{id}/rename (ended)', await A1.d.api.post(`/v1/calls/${callId}/rename`, { operationId: op(rec, 'rename-4'), displayName: 'Too late' }));
    await snapshots(rec, callId, 'ended');
    await settleAndRecord(rec, callId, ['call.created', 'call.accepted', 'call.ended']);
    await recordAfterEnd(rec, callId);
  });

  path('answered on a second installation', async (rec) => {
    const callId = 'call-answered-elsewhere';
    const { B1, B2 } = rec.parties;
    await rec.online();
    rec.http('A1 POST /v1/calls', await create(rec, callId));
    await invitationsPushed(rec, callId);
    rec.http('B2 POST /v1/calls/{id}/answer', await B2.d.api.post(`/v1/calls/${callId}/answer`, { operationId: op(rec, 'answer-b2'), installationId: B2.d.installationId }));
    rec.http('B1 POST /v1/calls/{id}/answer (lost)', await B1.d.api.post(`/v1/calls/${callId}/answer`, { operationId: op(rec, 'answer-b1'), installationId: B1.d.installationId }));
    rec.http('B1 POST /v1/calls/{id}/end localHangup (not in the call)', await B1.d.api.post(`/v1/calls/${callId}/end`, { operationId: op(rec, 'end-b1'), reason: 'localHangup' }));
    await snapshots(rec, callId, 'accepted', ['A1', 'B1', 'B2']);
    rec.http('B2 POST /v1/calls/{id}/end localHangup', await B2.d.api.post(`/v1/calls/${callId}/end`, { operationId: op(rec, 'end-b2'), reason: 'localHangup' }));
    await snapshots(rec, callId, 'ended', ['A1', 'B2']);
    await settleAndRecord(rec, callId, ['call.created', 'call.accepted', 'call.ended']);
    await recordAfterEnd(rec, callId);
  });

  path('ringing, ended by the server API', async (rec) => {
    const callId = 'call-server-ended-ringing';
    await rec.online();
    rec.http('A1 POST /v1/calls', await create(rec, callId));
    await invitationsPushed(rec, callId);
    rec.http('backend POST /v1/server/calls/{id}/end (no body)', await backend().post(`/v1/server/calls/${callId}/end`));
    rec.http('backend POST /v1/server/calls/{id}/end (again)', await backend().post(`/v1/server/calls/${callId}/end`));
    await snapshots(rec, callId, 'ended');
    await settleAndRecord(rec, callId, ['call.created', 'call.ended']);
    await recordAfterEnd(rec, callId);
  });

  path('accepted, ended by the server API', async (rec) => {
    const callId = 'call-server-ended-accepted';
    const { B1 } = rec.parties;
    await rec.online();
    rec.http('A1 POST /v1/calls', await create(rec, callId));
    await invitationsPushed(rec, callId);
    rec.http('B1 POST /v1/calls/{id}/answer', await B1.d.api.post(`/v1/calls/${callId}/answer`, { operationId: op(rec, 'answer'), installationId: B1.d.installationId }));
    rec.http('backend POST /v1/server/calls/{id}/end failed', await backend().post(`/v1/server/calls/${callId}/end`, { reason: 'failed' }));
    await snapshots(rec, callId, 'ended');
    await settleAndRecord(rec, callId, ['call.created', 'call.accepted', 'call.ended']);
    await recordAfterEnd(rec, callId);
  });
});
