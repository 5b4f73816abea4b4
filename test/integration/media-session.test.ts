import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { acceptedCall, answer, device, end, expectJson, expectProblem, getCall, ringingCall, sibling, type Device } from '../support/fixtures.js';
import type { ApiResponse } from '../support/http.js';
import { groupCall } from '../support/groupCall.js';

/**
 * POST /v1/calls/{id}/media-session (docs/protocol.md "Media session",
 * docs/api.md "Media session"): TURN REST API credentials (username `<expiry>:<userId>`,
 * credential base64 HMAC-SHA1 with TURN_SECRET), only for the caller's calling installation and
 * the answering installation of an accepted call. A second server on the same Redis runs with
 * MEDIA_SESSION_ANSWERS=true, where the callee's request on a ringing call is its answer claim.
 */

const TURN_SECRET = 'turn-shared-secret-for-tests';
const STUN = 'stun:stun.example.org:3478';
const TURN = ['turn:turn.example.org:3478?transport=udp', 'turns:turn.example.org:5349?transport=tcp'];
const TTL_S = 600;
const env = { ROLES: 'api', TURN_SECRET, TURN_URLS: [STUN, ...TURN].join(','), MEDIA_CREDENTIAL_TTL_S: String(TTL_S) };

let stack: Stack;
let url: string;
let answeringUrl: string;

beforeAll(async () => {
  stack = await startStack(env);
  url = stack.url;
  answeringUrl = (await stack.addServer({ ...env, MEDIA_SESSION_ANSWERS: 'true' })).url;
});

afterAll(async () => {
  await stack?.stop();
});

const mediaSession = (d: Device, callId: string, body: unknown = {}) => d.api.post(`/v1/calls/${callId}/media-session`, body);

/** Checks the credentials: shape, expiry, and the HMAC recomputed here with TURN_SECRET. */
function expectCredentials(res: ApiResponse, userId: string): void {
  expectJson(res, 200);
  const nowS = Math.floor(Date.now() / 1000);
  expect(Object.keys(res.json).sort()).toEqual(['expiresAtMs', 'iceServers']);
  const [stun, turn] = res.json.iceServers as { urls: string[]; username?: string; credential?: string }[];
  expect(res.json.iceServers).toHaveLength(2);
  expect(stun).toEqual({ urls: [STUN] });
  expect(turn).toEqual({ urls: TURN, username: expect.any(String), credential: expect.any(String) });
  const m = /^(\d+):(.+)$/.exec(turn!.username!);
  expect(m, turn!.username).not.toBeNull();
  const expiry = Number(m![1]);
  expect(m![2]).toBe(userId);
  expect(expiry).toBeGreaterThanOrEqual(nowS + TTL_S - 5);
  expect(expiry).toBeLessThanOrEqual(nowS + TTL_S + 1);
  expect(res.json.expiresAtMs).toBe(expiry * 1000);
  expect(turn!.credential).toBe(createHmac('sha1', TURN_SECRET).update(turn!.username!).digest('base64'));
}

describe('media credentials for an accepted call', () => {
  it('the caller’s calling installation gets TURN REST credentials for its userId', async () => {
    const { callId, caller } = await acceptedCall(url);
    expectCredentials(await mediaSession(caller, callId), caller.userId);
    // The body may be empty.
    expectCredentials(await caller.api.post(`/v1/calls/${callId}/media-session`), caller.userId);
  });

  it('the answering installation gets TURN REST credentials for its userId', async () => {
    const { callId, callee } = await acceptedCall(url);
    expectCredentials(await mediaSession(callee, callId), callee.userId);
  });

  it('a losing callee installation gets 409 answer_conflict with the winner’s snapshot (no credentials)', async () => {
    const { callId, callee, answered } = await acceptedCall(url);
    const loser = sibling(url, callee);
    const res = await mediaSession(loser, callId);
    expectProblem(res, 'answer_conflict', 'the call was answered by another installation', ['snapshot']);
    expect(JSON.stringify(res.json.snapshot)).toBe(answered.text);
    expect(res.text).not.toContain('credential');
  });

  it('another installation of the caller gets 403', async () => {
    const { callId, caller } = await acceptedCall(url);
    const res = await mediaSession(sibling(url, caller), callId);
    expectProblem(res, 'forbidden', 'media credentials are issued only to the installations in an accepted call; this call is accepted');
  });

  it('a non-member gets 404', async () => {
    const { callId } = await acceptedCall(url);
    expectProblem(await mediaSession(device(url), callId), 'not_found', 'call not found');
  });
});

describe('no media credentials outside an accepted call', () => {
  it('a ringing call → 403 for the caller and the callee (MEDIA_SESSION_ANSWERS off), and the call keeps ringing', async () => {
    const { callId, caller, callee, created } = await ringingCall(url);
    for (const d of [caller, callee]) {
      expectProblem(await mediaSession(d, callId), 'forbidden', 'media credentials are issued only to the installations in an accepted call; this call is ringing');
    }
    expect((await getCall(caller, callId)).text).toBe(created.text);
  });

  it('an ended call → 403 for both former participants', async () => {
    const { callId, caller, callee } = await acceptedCall(url);
    expect((await end(caller, callId, 'localHangup')).status).toBe(200);
    for (const d of [caller, callee]) {
      expectProblem(await mediaSession(d, callId), 'forbidden', 'media credentials are issued only to the installations in an accepted call; this call is ended');
    }
  });
});

describe('MEDIA_SESSION_ANSWERS=true: the callee’s media-session request on a ringing call is its answer claim', () => {
  it('answers the call and returns credentials', async () => {
    const { callId, caller, callee, created } = await ringingCall(answeringUrl);

    const res = await mediaSession(callee, callId);

    expectCredentials(res, callee.userId);
    const call = await getCall(caller, callId);
    expect(call.json).toEqual({
      ...created.json,
      revision: '2',
      state: 'accepted',
      answeredByInstallationId: callee.installationId,
      acceptedAtMs: expect.any(Number),
    });
    // Repeating it is not a second answer.
    expectCredentials(await mediaSession(callee, callId), callee.userId);
    expect((await getCall(caller, callId)).text).toBe(call.text);
    // The caller's calling installation gets credentials too.
    expectCredentials(await mediaSession(caller, callId), caller.userId);
  });

  it('a second callee installation loses: 409 answer_conflict; a later answer also loses', async () => {
    const { callId, callee } = await ringingCall(answeringUrl);
    expectCredentials(await mediaSession(callee, callId), callee.userId);
    const other = sibling(answeringUrl, callee);
    const lost = await mediaSession(other, callId);
    expectProblem(lost, 'answer_conflict', 'the call was answered by another installation', ['snapshot']);
    expect(lost.json.snapshot.answeredByInstallationId).toBe(callee.installationId);
    expectProblem(await answer(sibling(answeringUrl, callee), callId), 'answer_conflict', 'the call was answered by another installation', ['snapshot']);
  });

  it('the caller’s request on a ringing call is not an answer: 403, still ringing', async () => {
    const { callId, caller, created } = await ringingCall(answeringUrl);
    expectProblem(await mediaSession(caller, callId), 'forbidden', 'media credentials are issued only to the installations in an accepted call; this call is ringing');
    expect((await getCall(caller, callId)).text).toBe(created.text);
  });

  it('an operationId in the body names the answer claim: an answer with that operationId replays it', async () => {
    const { callId, caller, callee } = await ringingCall(answeringUrl);
    const operationId = `ms-${callId}`;
    expectCredentials(await mediaSession(callee, callId, { operationId }), callee.userId);
    const accepted = await getCall(caller, callId);
    expect(accepted.json.answeredByInstallationId).toBe(callee.installationId);
    // The same operation as a plain answer is the same request: its original outcome.
    const replay = await answer(callee, callId, { operationId });
    expectJson(replay, 200);
    expect(replay.text).toBe(accepted.text);
    // Reused for another call it is a different request.
    const other = await ringingCall(answeringUrl, device(answeringUrl), callee);
    expectProblem(await mediaSession(callee, other.callId, { operationId }), 'idempotency_conflict', 'this operationId was already used with a different request');
    expect((await getCall(other.caller, other.callId)).text).toBe(other.created.text);
  });
});

describe('a group call on a server without an SFU', () => {
  it('its joined installations get 503 sfu_unavailable without retry-after (TURN alone cannot carry a group); the others are refused as ever; the call goes on', async () => {
    const { callId, caller, members } = await groupCall(url, 2, { joined: 1 });
    for (const d of [caller, members[0]!]) {
      const res = await mediaSession(d, callId);
      expectProblem(res, 'sfu_unavailable', /group calls need an SFU and this server has none configured/);
      expect(res.headers.get('retry-after')).toBeNull();
    }
    expectProblem(await mediaSession(members[1]!, callId), 'forbidden', /this call is accepted/);
    expectProblem(await mediaSession(device(url), callId), 'not_found', /call not found/);
    expect((await getCall(caller, callId)).json.state).toBe('accepted');
  });
});
