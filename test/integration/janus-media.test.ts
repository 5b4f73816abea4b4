import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { countingJanusSfu, janusEnv, startJanus, type Janus } from '../support/janus.js';
import { janusRooms, joinRoom } from '../support/janusClient.js';
import { acceptedCall, device, end, expectJson, expectProblem, getCall, relayDone, ringingCall, sibling, uid, type Device } from '../support/fixtures.js';
import { janusRoomId } from '../../src/media/janus.js';
import { roomKeeper } from '../../src/media/roomKeeper.js';
import type { CallChange } from '../../src/calls/change.js';
import type { CallRecord } from '../../src/calls/model.js';
import { createLogger } from '../../src/util/logger.js';

/**
 * SFU media through a real Janus (docs/operations.md "SFU media", docs/api.md "Media session"):
 * with MEDIA_MODE=sfu a call's VideoRoom room is made on accept and removed on end, once; the
 * credential media-session hands out opens that room, for that installation, and Janus itself
 * refuses it elsewhere, after its expiry, or after the call ended; with Janus down, media-session
 * answers 503 sfu_unavailable while the call goes on, and after Janus returns a new call gets a
 * working room. Whether a credential opens a room is asked of Janus (test/support/janusClient.ts).
 */

let janus: Janus;
let stack: Stack;
const ks = { prefix: 'cb', shards: 8 };

beforeAll(async () => {
  janus = await startJanus();
  stack = await startStack({
    MEDIA_MODE: 'sfu',
    SFU: 'janus',
    ...janusEnv(janus),
    JANUS_TIMEOUT_MS: '1000',
    TURN_URLS: 'turn:turn.example.org:3478?transport=udp',
    TURN_SECRET: 'turn-secret-for-janus-tests',
  });
});

afterAll(async () => {
  await stack?.stop();
  await janus?.stop();
});

const mediaSession = (d: Device, callId: string) => d.api.post(`/v1/calls/${callId}/media-session`, {});
const rooms = () => janusRooms(janus.apiUrl, janus.apiSecret, janus.adminKey);
const silent = createLogger('fatal', new Writable({ write: (_c, _e, cb) => cb() }));

interface SfuReply {
  iceServers: { urls: string[]; username?: string; credential?: string }[];
  expiresAtMs: number;
  sfu: { kind: string; url: string; room: number; token: string };
}

/** An accepted call whose accept the relay has passed on (so its room step ran). */
async function relayedAcceptedCall() {
  const pair = await acceptedCall(stack.url);
  await relayDone(stack.redis, ks, [pair.callId]);
  return pair;
}

const directSfu = (counts: Record<string, number>) => countingJanusSfu(janus, counts);

describe('the room follows the call', () => {
  it('is made once when the call is accepted, and both parties get credentials that open it in Janus', async () => {
    const { callId, caller, callee } = await ringingCall(stack.url);
    await relayDone(stack.redis, ks, [callId]);
    // Ringing: no room yet, and no credential.
    expect(await rooms()).not.toContain(janusRoomId(callId));
    await callee.api.post(`/v1/calls/${callId}/answer`, { operationId: uid('op'), installationId: callee.installationId });
    await relayDone(stack.redis, ks, [callId]);
    expect((await rooms()).filter((r) => r === janusRoomId(callId))).toHaveLength(1);

    const forCaller = await mediaSession(caller, callId);
    expectJson(forCaller, 200);
    const body = forCaller.json as SfuReply;
    expect(body.sfu).toEqual({ kind: 'janus', url: janus.wsUrl, room: janusRoomId(callId), token: expect.any(String), participantId: expect.any(Number) });
    expect(body.iceServers[0]!.urls).toEqual(['turn:turn.example.org:3478?transport=udp']);
    expect(body.sfu.token.startsWith(`${body.expiresAtMs / 1000},janus,janus.plugin.videoroom,`)).toBe(true);
    const forCallee = (await mediaSession(callee, callId)).json as SfuReply;
    expect(forCallee.sfu.token).not.toBe(body.sfu.token);

    expect(await joinRoom(janus.apiUrl, body.sfu.room, body.sfu.token)).toEqual({ joined: true });
    expect(await joinRoom(janus.apiUrl, forCallee.sfu.room, forCallee.sfu.token)).toEqual({ joined: true });
    // Still one room: media-session found it made.
    expect((await rooms()).filter((r) => r === janusRoomId(callId))).toHaveLength(1);
  });

  it('a relay retry (the same accepted change handled again, as after a crash) makes no second room', async () => {
    const { callId } = await relayedAcceptedCall();
    const counts: Record<string, number> = {};
    const sfu = directSfu(counts);
    const handler = roomKeeper(sfu, 'sfu', silent);
    const record = { callId, state: 'accepted', acceptedAtMs: Date.now() } as CallRecord;
    const change: CallChange = { entryId: '1-0', shard: 0, kind: 'answered', atMs: Date.now(), call: record };
    const reads = { pushRegistrations: new Map(), calls: new Map() };
    await handler.handle([change], reads);
    await handler.handle([change], reads);
    expect((await rooms()).filter((r) => r === janusRoomId(callId))).toHaveLength(1);
    // The server's relay made it; both retries found it made.
    expect(counts).toEqual({});
    expect(await sfu.openRoom(callId)).toBe('existed');
  });

  it('is removed when the call ends: Janus lists no room for it, the old credential opens nothing, and none is issued', async () => {
    const { callId, caller, callee } = await relayedAcceptedCall();
    const before = (await mediaSession(caller, callId)).json as SfuReply;
    expect(await rooms()).toContain(janusRoomId(callId));
    expectJson(await end(callee, callId, 'localHangup'), 200);
    await relayDone(stack.redis, ks, [callId]);
    expect(await rooms()).not.toContain(janusRoomId(callId));
    expect(await joinRoom(janus.apiUrl, before.sfu.room, before.sfu.token)).toEqual({ joined: false, code: 426, stage: 'join' });
    expectProblem(await mediaSession(caller, callId), 'forbidden', /this call is ended/);
    // The refusal made no room again.
    expect(await rooms()).not.toContain(janusRoomId(callId));
  });
});

describe('who gets in', () => {
  it('nobody outside the call gets a credential: a stranger, the callee’s other installation, a ringing call', async () => {
    const { callId, callee } = await relayedAcceptedCall();
    expectProblem(await mediaSession(device(stack.url), callId), 'not_found', 'call not found');
    const other = await mediaSession(sibling(stack.url, callee), callId);
    expect(other.status).toBe(409);
    expect(other.json.code).toBe('answer_conflict');
    const ringing = await ringingCall(stack.url);
    expectProblem(await mediaSession(ringing.caller, ringing.callId), 'forbidden', /this call is ringing/);
  });

  it('a credential opens only its own room (another call’s valid token is not on its list), and a forged one opens none', async () => {
    const a = await relayedAcceptedCall();
    const b = await relayedAcceptedCall();
    const tokenA = ((await mediaSession(a.caller, a.callId)).json as SfuReply).sfu.token;
    // A valid session token, but not on room B's allowed list.
    expect(await joinRoom(janus.apiUrl, janusRoomId(b.callId), tokenA)).toEqual({ joined: false, code: 433, stage: 'join' });
    // The same shape signed with another secret: Janus refuses the session itself.
    const forged = tokenA.replace(/:.*$/, ':' + Buffer.from('not the signature').toString('base64'));
    expect(await joinRoom(janus.apiUrl, janusRoomId(a.callId), forged)).toEqual({ joined: false, code: 403, stage: 'session' });
    // Room A still admits its own token.
    expect(await joinRoom(janus.apiUrl, janusRoomId(a.callId), tokenA)).toEqual({ joined: true });
  });

  it('an expired credential does not open the room, though it is on the room’s list', async () => {
    const { callId, caller } = await relayedAcceptedCall();
    const sfu = directSfu({});
    const participant = { callId, userId: caller.userId, installationId: caller.installationId };
    const expired = await sfu.admit(participant, Date.now() - 2000);
    expect(await joinRoom(janus.apiUrl, expired.room as number, expired.token)).toEqual({ joined: false, code: 403, stage: 'session' });
    const fresh = await sfu.admit(participant, Date.now() + 60_000);
    expect(await joinRoom(janus.apiUrl, fresh.room as number, fresh.token)).toEqual({ joined: true });
  });
});

describe('Janus down', () => {
  it('media-session answers 503 sfu_unavailable, the call goes on, and after Janus returns a new call gets a working room', async () => {
    const server = stack.servers[0]!;
    const live = await relayedAcceptedCall();
    await janus.kill();
    try {
      const refused = await mediaSession(live.caller, live.callId);
      expectProblem(refused, 'sfu_unavailable', /media server is unreachable/);
      expect(refused.headers.get('retry-after')).toBe('2');
      // Signaling goes on: an in-call message is delivered, and the call is still accepted.
      const msg = await live.caller.api.post(`/v1/calls/${live.callId}/messages`, { operationId: uid('op'), payload: { kind: 'still-here' } });
      expectJson(msg, 200);
      const ready = await device(stack.url).api.get('/readyz');
      expect(ready.status).toBe(200);
      expect(ready.json).toMatchObject({ status: 'ready', sfu: false });
      // A call accepted while Janus is down is accepted all the same (its room step is skipped).
      const during = await relayedAcceptedCall();
      expect((await getCall(during.caller, during.callId)).json.state).toBe('accepted');
      expect((await getCall(live.caller, live.callId)).json.state).toBe('accepted');
      const metrics = await (await fetch(`${server.metricsUrl}/metrics`)).text();
      expect(metrics).toMatch(/^calling_sfu_errors_total\{sfu="janus",op="allow"\} [1-9]/m);
    } finally {
      await janus.start();
    }
    expect((await device(stack.url).api.get('/readyz')).json).toMatchObject({ sfu: true });
    const after = await relayedAcceptedCall();
    expect(await rooms()).toContain(janusRoomId(after.callId));
    const creds = (await mediaSession(after.callee, after.callId)).json as SfuReply;
    expect(await joinRoom(janus.apiUrl, creds.sfu.room, creds.sfu.token)).toEqual({ joined: true });
    // The call that lived through the outage gets its room again from its next media-session.
    const again = (await mediaSession(live.caller, live.callId)).json as SfuReply;
    expect(await joinRoom(janus.apiUrl, again.sfu.room, again.sfu.token)).toEqual({ joined: true });
    const metrics = await (await fetch(`${server.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/^calling_sfu_rooms_total\{sfu="janus",op="created"\} [1-9]/m);
    expect(metrics).toMatch(/^calling_sfu_rooms_total\{sfu="janus",op="destroyed"\} [1-9]/m);
    expect(metrics).toMatch(/^calling_sfu_joins_total\{sfu="janus"\} [1-9]/m);
  });
});
