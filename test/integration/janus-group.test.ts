import { createHmac } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallingClient, MediaSessionKeeper, MediaSessionStoppedError, type MediaSession, type MediaSessionReason } from '@calling-backend/client';
import { startStack, type Stack } from '../support/stack.js';
import { countingJanusSfu, janusEnv, startJanus, type Janus } from '../support/janus.js';
import { janusRooms, joinRoom, stayInRoom, videoroomAdmin } from '../support/janusClient.js';
import { acceptedCall, answer, device, end, expectJson, expectProblem, getCall, relayDone, sibling, type Device } from '../support/fixtures.js';
import { endForAll, groupCall } from '../support/groupCall.js';
import { api } from '../support/http.js';
import { waitUntil } from '../support/wait.js';
import { janusRoomId } from '../../src/media/janus.js';
import { roomKeeper } from '../../src/media/roomKeeper.js';
import { newServerKey } from '../../src/auth/serverKeys.js';
import type { CallChange } from '../../src/calls/change.js';
import { readStoredCall } from '../../src/calls/storedCall.js';
import { keys } from '../../src/redis/keys.js';
import { createLogger } from '../../src/util/logger.js';

/**
 * Group calls through a real Janus (docs/group-calls.md "Media", docs/operations.md "SFU media"),
 * on a server whose one-to-one calls stay `p2p` (MEDIA_MODE's default): a group call's room is made
 * at its first join, once, and removed when it ends; media-session gives the SFU credential to
 * each member's joined installation and to no one else; a member who leaves, or whom the server API
 * removes, is kicked from the room and its credential no longer opens it; with Janus down the
 * group call goes on and its media-session answers 503 until Janus is back. Janus itself answers
 * whether a credential opens the room and who is in it (test/support/janusClient.ts).
 */

let janus: Janus;
let stack: Stack;
const ks = { prefix: 'cb', shards: 8 };
const serverKey = newServerKey();

beforeAll(async () => {
  janus = await startJanus();
  stack = await startStack({
    ...janusEnv(janus),
    JANUS_TIMEOUT_MS: '1000',
    TURN_URLS: 'turn:turn.example.org:3478?transport=udp',
    TURN_SECRET: 'turn-secret-for-janus-group-tests',
    SERVER_API_KEYS: serverKey.hash,
  });
});

afterAll(async () => {
  await stack?.stop();
  await janus?.stop();
});

interface Access {
  room: number;
  token: string;
  participantId: number;
}
const mediaSession = (d: Device, callId: string) => d.api.post(`/v1/calls/${callId}/media-session`, {});
const rooms = () => janusRooms(janus.apiUrl, janus.apiSecret, janus.adminKey);
const roomsOf = async (callId: string) => (await rooms()).filter((r) => r === janusRoomId(callId));
const silent = createLogger('fatal', new Writable({ write: (_c, _e, cb) => cb() }));

async function sfuAccess(d: Device, callId: string): Promise<Access> {
  const res = await mediaSession(d, callId);
  expectJson(res, 200);
  expect(res.json.sfu).toMatchObject({ kind: 'janus', url: janus.wsUrl, room: janusRoomId(callId) });
  return res.json.sfu as Access;
}

const metricsText = async () => (await Promise.all(stack.servers.map(async (srv) => (await fetch(`${srv.metricsUrl}/metrics`)).text()))).join('\n');

/** The publisher ids Janus has in the call's room. */
async function inRoom(callId: string): Promise<number[]> {
  const data = await videoroomAdmin(janus.apiUrl, janus.apiSecret, { request: 'listparticipants', room: janusRoomId(callId) });
  return ((data.participants ?? []) as { id: number }[]).map((p) => p.id).sort();
}

describe('a group call through Janus, one-to-one calls staying p2p', () => {
  it('the room is made at the first join, once (a relay retry too), and removed at the end; one-to-one calls get no room', async () => {
    const { callId, caller, members } = await groupCall(stack.url, 2);
    await relayDone(stack.redis, ks, [callId]);
    expect(await roomsOf(callId)).toEqual([]);
    expectProblem(await mediaSession(caller, callId), 'forbidden', /this call is ringing/);

    expectJson(await answer(members[0]!, callId), 200);
    await relayDone(stack.redis, ks, [callId]);
    expect(await roomsOf(callId)).toHaveLength(1);

    // The relay hands the first join over again (as after a crash): no second room, nothing created.
    const call = (await readStoredCall(stack.redis, keys.call(ks, callId)))!;
    const change: CallChange = { entryId: '1-0', shard: 0, kind: 'joined', atMs: call.acceptedAtMs!, call, subjects: [members[0]!.userId] };
    const counts: Record<string, number> = {};
    const handler = roomKeeper(countingJanusSfu(janus, counts), 'p2p', silent);
    await handler.handle([change], { pushRegistrations: new Map(), calls: new Map() });
    expect(counts).toEqual({});
    expect(await roomsOf(callId)).toHaveLength(1);

    expectJson(await endForAll(caller, callId), 200);
    await relayDone(stack.redis, ks, [callId]);
    expect(await roomsOf(callId)).toEqual([]);

    const pair = await acceptedCall(stack.url);
    await relayDone(stack.redis, ks, [pair.callId]);
    const p2p = await mediaSession(pair.caller, pair.callId);
    expectJson(p2p, 200);
    expect(p2p.json.sfu).toBeUndefined();
    expect(await roomsOf(pair.callId)).toEqual([]);
  });

  it('media-session: the joined installations get a credential Janus admits; a ringing member, another installation, a stranger and an ended call get none', async () => {
    const { callId, caller, members } = await groupCall(stack.url, 2, { joined: 1 });
    const [bob, carol] = members as [Device, Device];
    await relayDone(stack.redis, ks, [callId]);
    for (const d of [caller, bob]) {
      const access = await sfuAccess(d, callId);
      expect(await joinRoom(janus.apiUrl, access.room, access.token, access.participantId)).toEqual({ joined: true });
    }
    const a = await sfuAccess(caller, callId);
    const b = await sfuAccess(bob, callId);
    expect(a.participantId).not.toBe(b.participantId);

    expectProblem(await mediaSession(carol, callId), 'forbidden', /this call is accepted/);
    expectProblem(await mediaSession(sibling(stack.url, bob), callId), 'forbidden', /this call is accepted/);
    expectProblem(await mediaSession(device(stack.url), callId), 'not_found', /call not found/);

    expectJson(await endForAll(caller, callId), 200);
    expectProblem(await mediaSession(bob, callId), 'forbidden', /this call is ended/);
    await relayDone(stack.redis, ks, [callId]);
    expect(await joinRoom(janus.apiUrl, b.room, b.token, b.participantId)).toMatchObject({ joined: false, code: 426 });
  });

  it('a member who leaves, and one the server API removes, is kicked from the room and its credential no longer opens it; the others stay', async () => {
    const { callId, caller, members } = await groupCall(stack.url, 3, { joined: 3 });
    const [bob, carol, dave] = members as [Device, Device, Device];
    await relayDone(stack.redis, ks, [callId]);
    const access = new Map<Device, Access>();
    const sessions: (() => Promise<void>)[] = [];
    try {
      for (const d of [caller, bob, carol, dave]) {
        const acc = await sfuAccess(d, callId);
        access.set(d, acc);
        const stay = await stayInRoom(janus.apiUrl, acc.room, acc.token, acc.participantId);
        sessions.push(stay.leave);
        expect(stay.outcome).toEqual({ joined: true });
      }
      const ids = (...ds: Device[]) => ds.map((d) => access.get(d)!.participantId).sort();
      expect(await inRoom(callId)).toEqual(ids(caller, bob, carol, dave));

      expectJson(await end(carol, callId, 'localHangup'), 200);
      const removed = await api(stack.url, serverKey.key).del(`/v1/server/calls/${callId}/participants/${encodeURIComponent(dave.userId)}`);
      expect(removed.json.removed, removed.text).toBe(true);
      await relayDone(stack.redis, ks, [callId]);

      expect(await inRoom(callId)).toEqual(ids(caller, bob));
      expect(await metricsText()).toMatch(/^calling_sfu_kicks_total\{sfu="janus"\} [2-9]/m);
      for (const gone of [carol, dave]) {
        const { room, token, participantId } = access.get(gone)!;
        expect(await joinRoom(janus.apiUrl, room, token, participantId), gone.userId).toMatchObject({ joined: false, stage: 'join', code: 433 });
        expectProblem(await mediaSession(gone, callId), 'forbidden', /this call is accepted/);
      }
      // Those still in the call keep their way in.
      expect(await joinRoom(janus.apiUrl, access.get(bob)!.room, access.get(bob)!.token)).toEqual({ joined: true });
      // Janus tears a destroyed session down after answering: that second publisher leaves the
      // room a moment later (a loaded CI machine saw it still listed).
      await waitUntil('the second join gone from the room', async () => JSON.stringify(await inRoom(callId)) === JSON.stringify(ids(caller, bob)), 5_000);

      // The relay hands carol's leave over again (as after a crash): nobody is kicked twice.
      const leftCall = (await readStoredCall(stack.redis, keys.call(ks, callId)))!;
      const leave: CallChange = { entryId: '1-0', shard: 0, kind: 'member', atMs: Date.now(), call: leftCall, subjects: [carol.userId] };
      const counts: Record<string, number> = {};
      const handler = roomKeeper(countingJanusSfu(janus, counts), 'p2p', silent);
      await handler.handle([leave], { pushRegistrations: new Map(), calls: new Map([[callId, leftCall]]) });
      expect(counts).toEqual({});
      expect(await inRoom(callId)).toEqual(ids(caller, bob));

      // Back in the call, the member gets a credential that opens the room again; the old leave,
      // handed over once more after the relay read her back in, leaves her there.
      expectJson(await answer(carol, callId), 200);
      await relayDone(stack.redis, ks, [callId]);
      const again = await sfuAccess(carol, callId);
      const back = await stayInRoom(janus.apiUrl, again.room, again.token, again.participantId);
      sessions.push(back.leave);
      expect(back.outcome).toEqual({ joined: true });
      const now = (await readStoredCall(stack.redis, keys.call(ks, callId)))!;
      await handler.handle([leave], { pushRegistrations: new Map(), calls: new Map([[callId, now]]) });
      expect(counts).toEqual({});
      expect(await inRoom(callId)).toEqual(ids(caller, bob, carol));
      expect(await joinRoom(janus.apiUrl, again.room, again.token)).toEqual({ joined: true });
    } finally {
      await Promise.all(sessions.map((leave) => leave()));
    }
    expectJson(await endForAll(caller, callId), 200);
    await relayDone(stack.redis, ks, [callId]);
    expect(await roomsOf(callId)).toEqual([]);
  });

  it('a member who moves the call to its tablet: the phone is kicked and its credential no longer opens the room; the tablet gets one that does', async () => {
    const { callId, caller, members } = await groupCall(stack.url, 2, { joined: 2 });
    const [bob, carol] = members as [Device, Device];
    await relayDone(stack.redis, ks, [callId]);
    const sessions: (() => Promise<void>)[] = [];
    try {
      const access = new Map<Device, Access>();
      for (const d of [caller, bob, carol]) {
        const acc = await sfuAccess(d, callId);
        access.set(d, acc);
        const stay = await stayInRoom(janus.apiUrl, acc.room, acc.token, acc.participantId);
        sessions.push(stay.leave);
        expect(stay.outcome).toEqual({ joined: true });
      }
      const bobTablet = sibling(stack.url, bob);
      const revision = (await getCall(bob, callId)).json.revision as string;
      expectJson(await bobTablet.api.post(`/v1/calls/${callId}/move`, { operationId: `op-${Date.now()}`, installationId: bobTablet.installationId, expectedRevision: revision }), 200);
      await relayDone(stack.redis, ks, [callId]);

      const phone = access.get(bob)!;
      const ids = (...ds: Device[]) => ds.map((d) => access.get(d)!.participantId).sort();
      expect(await inRoom(callId)).toEqual(ids(caller, carol));
      expect(await joinRoom(janus.apiUrl, phone.room, phone.token, phone.participantId)).toMatchObject({ joined: false, stage: 'join', code: 433 });
      expectProblem(await mediaSession(bob, callId), 'forbidden', /this call is accepted/);
      const tablet = await sfuAccess(bobTablet, callId);
      const stay = await stayInRoom(janus.apiUrl, tablet.room, tablet.token, tablet.participantId);
      sessions.push(stay.leave);
      expect(stay.outcome).toEqual({ joined: true });
      expect(await inRoom(callId)).toEqual([...ids(caller, carol), tablet.participantId].sort());
    } finally {
      await Promise.all(sessions.map((leave) => leave()));
    }
    expectJson(await endForAll(caller, callId), 200);
    await relayDone(stack.redis, ks, [callId]);
  });

  it('a member who renews its credential stays: its Janus session outlives the first token, the new one keeps it and opens the room, the expired one leaves the list; once it leaves, neither opens anything', async () => {
    const { callId, caller, members } = await groupCall(stack.url, 2, { joined: 2 });
    const [bob] = members as [Device, Device];
    await relayDone(stack.redis, ks, [callId]);
    // A first credential that expires within two seconds (media-session's lifetime is at least 30 s).
    const first = await countingJanusSfu(janus, {}).admit({ callId, userId: bob.userId, installationId: bob.installationId }, Date.now() + 2000);
    const stay = await stayInRoom(janus.apiUrl, first.room as number, first.token, first.participantId);
    try {
      expect(stay.outcome).toEqual({ joined: true });
      // Janus refuses the expired token on the session's keepalives, as it did to the calls.
      await waitUntil('Janus to refuse the first token', async () => (await stay.keepalive(first.token)) === 403, 10_000);
      const renewed = await sfuAccess(bob, callId);
      expect(renewed.participantId).toBe(first.participantId);
      // The same session goes on with the renewed token, still in the room.
      expect(await stay.keepalive(renewed.token)).toBe('ack');
      expect(await inRoom(callId)).toEqual([renewed.participantId]);
      expect(await joinRoom(janus.apiUrl, renewed.room, renewed.token)).toEqual({ joined: true });
      // The room's list (asked of Janus with the room's secret) holds the renewed token, not the expired one.
      const secret = createHmac('sha256', janus.adminKey).update(`secret\n${callId}`).digest('base64url');
      const listed = await videoroomAdmin(janus.apiUrl, janus.apiSecret, { request: 'allowed', room: renewed.room, secret, action: 'add', allowed: [renewed.token] });
      expect(listed.allowed).toContain(renewed.token);
      expect(listed.allowed).not.toContain(first.token);

      expectJson(await end(bob, callId, 'localHangup'), 200);
      await relayDone(stack.redis, ks, [callId]);
      expect(await inRoom(callId)).toEqual([]);
      expect(await joinRoom(janus.apiUrl, renewed.room, renewed.token, renewed.participantId)).toMatchObject({ joined: false, stage: 'join', code: 433 });
      expectProblem(await mediaSession(bob, callId), 'forbidden', /this call is accepted/);
    } finally {
      await stay.leave();
    }
    expectJson(await endForAll(caller, callId), 200);
    await relayDone(stack.redis, ks, [callId]);
  });

  it("the client package's MediaSessionKeeper renews before expiry, rides out Janus down (503 with retry-after) with a session whose token opens the room again, and stops when the member has left", async () => {
    const { callId, caller, members } = await groupCall(stack.url, 2, { joined: 2 });
    const [bob] = members as [Device, Device];
    await relayDone(stack.redis, ks, [callId]);
    const sessions: { session: MediaSession; reason: MediaSessionReason }[] = [];
    const retries: number[] = [];
    let stopped: unknown;
    const keeper = new MediaSessionKeeper({
      client: new CallingClient({ baseUrl: stack.url, token: bob.token }),
      callId,
      // 0.3 % of the 600 s lifetime: a renewal about 1.8 s after each session.
      renewAt: 0.003,
      onSession: (session, reason) => sessions.push({ session, reason }),
      onRetry: (_err, delayMs) => retries.push(delayMs),
      onStopped: (err) => (stopped = err),
    });
    try {
      const first = await keeper.start();
      expect(first.sfu).toMatchObject({ kind: 'janus', room: janusRoomId(callId) });
      await waitUntil('a timed renewal', () => sessions.some((s) => s.reason === 'renewal'), 10_000);

      await janus.kill();
      let refreshed: Promise<MediaSession>;
      try {
        refreshed = keeper.refresh();
        // Retried after the reply's retry-after (2 s), not given up.
        await waitUntil('a retried 503', () => retries.length > 0, 10_000);
        expect(retries[0]).toBe(2000);
      } finally {
        await janus.start();
      }
      const after = await refreshed;
      expect(after.sfu!.token).not.toBe(first.sfu!.token);
      expect(await joinRoom(janus.apiUrl, after.sfu!.room as number, after.sfu!.token, after.sfu!.participantId)).toEqual({ joined: true });

      expectJson(await end(bob, callId, 'localHangup'), 200);
      await relayDone(stack.redis, ks, [callId]);
      await expect(keeper.refresh()).rejects.toMatchObject({ status: 403 });
      expect(stopped).toMatchObject({ status: 403, code: 'forbidden' });
      expect(keeper.renewsAtMs).toBeUndefined();
      await expect(keeper.refresh()).rejects.toBeInstanceOf(MediaSessionStoppedError);
    } finally {
      keeper.stop();
    }
    expectJson(await endForAll(caller, callId), 200);
    await relayDone(stack.redis, ks, [callId]);
  });

  it('with Janus down, media-session answers 503 while joins and leaves go on; once it is back, the joined members get a working room and the one who left none', async () => {
    const { callId, caller, members } = await groupCall(stack.url, 2, { joined: 1 });
    const [bob, carol] = members as [Device, Device];
    await relayDone(stack.redis, ks, [callId]);
    await janus.kill();
    try {
      const refused = await mediaSession(caller, callId);
      expectProblem(refused, 'sfu_unavailable', /media server is unreachable/);
      expect(refused.headers.get('retry-after')).toBe('2');
      expectJson(await answer(carol, callId), 200);
      expectJson(await end(bob, callId, 'localHangup'), 200);
      await relayDone(stack.redis, ks, [callId]);
      expect((await getCall(caller, callId)).json.state).toBe('accepted');
    } finally {
      await janus.start();
    }
    for (const d of [caller, carol]) {
      const access = await sfuAccess(d, callId);
      expect(await joinRoom(janus.apiUrl, access.room, access.token, access.participantId)).toEqual({ joined: true });
    }
    expectProblem(await mediaSession(bob, callId), 'forbidden', /this call is accepted/);
    expectJson(await endForAll(caller, callId), 200);
    await relayDone(stack.redis, ks, [callId]);
    expect(await roomsOf(callId)).toEqual([]);
  });
});
