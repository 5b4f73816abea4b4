import { randomUUID } from 'node:crypto';
import { TEST_REDIS_COMMAND_TIMEOUT_MS } from '../support/server.js';
import { afterAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { stackForFile, type Stack } from '../support/stack.js';
import {
  acceptedCall,
  answer,
  device,
  end,
  eventsUntil,
  expectJson,
  expectProblem,
  getCall,
  headCursor,
  ringingCall,
  sibling,
  sameShardCallId,
  sleep,
  uid,
} from '../support/fixtures.js';
import { connectRedis } from '../../src/redis/connection.js';
import { PushRegistry, registrationField, tokenHash } from '../../src/push/registry.js';
import { DAY_MS } from '../../src/calls/retention.js';
import { keys } from '../../src/redis/keys.js';

/**
 * The error conditions of docs/api.md "Errors" and docs/protocol.md "States and transitions": one
 * test per condition that concerns the server, named Condition → Result, against a real server with all roles so that events can be observed.
 *
 * Rows that are client-only, with no server behaviour to test:
 *  - "Framework hand-over without native bootstrap → notConfigured": a result of the client
 *    library's Dart/JavaScript API (the phone library's, outside this repo); it never reaches the backend.
 * Rows that are mostly client behaviour are tested for their server part only:
 *  - "Outgoing call rejected locally → client ends the call with reason failed": the decision is
 *    the phone's; the server's part is accepting `failed` and telling the callee.
 *  - "Late, expired, cancelled, or duplicate invitation → does not ring": not ringing is the
 *    library's job; the server's part is never resurrecting an ended call, never inviting twice
 *    for a retried create, and putting expiresAtMs in the invitation so a late one is ignored.
 *  - "Push token reported invalid by a push provider → token removed": the provider round trip
 *    belongs to the push senders' own tests (local APNs/FCM test servers); here the removal
 *    itself, as the push worker performs it on the registry, against the real Redis.
 */

const KS = { prefix: 'cb', shards: 8 };
let stack: Stack;
let url: string;
let commands: Redis;

stackForFile({}, async (s) => {
  stack = s;
  url = s.url;
  commands = connectRedis(s.redisUrl, 'commands', 'spec-errors-test', TEST_REDIS_COMMAND_TIMEOUT_MS);
  await commands.connect();
});
// Runs before the stack stops (vitest runs afterAll hooks last-registered first).
afterAll(() => commands?.disconnect());

describe('error conditions of docs/api.md "Errors"', () => {
  it('Answer lost to another device → conflict (409) carrying the winner’s snapshot; no media session', async () => {
    const caller = device(url);
    const winner = device(url);
    const loser = sibling(url, winner);
    const loserCursor = await headCursor(loser);
    const { callId, answered } = await acceptedCall(url, caller, winner);

    const res = await answer(loser, callId);

    expectProblem(res, 'answer_conflict', 'the call was answered by another installation', ['snapshot']);
    expect(JSON.stringify(res.json.snapshot)).toBe(answered.text);
    expect(res.json.snapshot.answeredByInstallationId).toBe(winner.installationId);
    const media = await loser.api.post(`/v1/calls/${callId}/media-session`, {});
    expect(media.status).toBe(409);
    expect(media.json.code).toBe('answer_conflict');
    expect(media.json.iceServers).toBeUndefined();
    // The loser still stops ringing: call.ended answeredElsewhere reaches it (docs/protocol.md "Who receives what").
    const events = await eventsUntil(loser, loserCursor, (e) => e.some((x) => x.type === 'call.ended'));
    expect(events.filter((e) => e.type === 'call.ended')).toMatchObject([{ callId, reason: 'answeredElsewhere', revision: '2' }]);
  });

  it('Same operationId with a different payload → conflict', async () => {
    const caller = device(url);
    const operationId = uid('op');
    const first = await caller.api.post('/v1/calls', { callId: randomUUID(), calleeUserId: uid('callee'), operationId });
    expect(first.status).toBe(201);
    const secondCallId = randomUUID();
    const res = await caller.api.post('/v1/calls', { callId: secondCallId, calleeUserId: uid('callee'), operationId });
    expectProblem(res, 'idempotency_conflict', 'this operationId was already used with a different request');
    expect((await getCall(caller, secondCallId)).status).toBe(404);
  });

  it('Same operationId and same payload → original outcome returned', async () => {
    const caller = device(url);
    const callee = device(url);
    const body = { callId: randomUUID(), calleeUserId: callee.userId, operationId: uid('op') };
    const first = await caller.api.post('/v1/calls', body);
    await sleep(5);
    const second = await caller.api.post('/v1/calls', body);
    expect([second.status, second.text]).toEqual([201, first.text]);
    expect(first.status).toBe(201);
  });

  it('Push token reported invalid by a push provider → token removed', async () => {
    const d = device(url);
    const token = 'ab12'.repeat(16);
    const path = `/v1/installations/${d.installationId}/push-tokens/iosVoip`;
    const put = await d.api.put(path, { token, appId: 'com.example.app', iosEnvironment: 'production' });
    expect(put.status).toBe(200);
    const registry = new PushRegistry(commands, KS, DAY_MS);
    const regKey = keys.pushRegistrations(KS, d.userId);
    const field = registrationField(d.installationId, 'iosVoip');

    // The provider rejected a push sent with an older token: the current registration stays.
    expect(await registry.remove(d.userId, d.installationId, 'iosVoip', { tokenHash: tokenHash('cd34'.repeat(16)) })).toBe(false);
    // The token was re-registered after the failed push was sent: it stays.
    expect(await registry.remove(d.userId, d.installationId, 'iosVoip', { tokenHash: tokenHash(token), notAfterMs: put.json.updatedAtMs - 1 })).toBe(false);
    expect(JSON.parse((await stack.redis.hget(regKey, field))!).token).toBe(token);

    // The provider rejected this very token: removed, and no longer a push target.
    expect(await registry.remove(d.userId, d.installationId, 'iosVoip', { tokenHash: tokenHash(token), notAfterMs: put.json.updatedAtMs })).toBe(true);
    expect(await stack.redis.hexists(regKey, field)).toBe(0);
    expect(await registry.list(d.userId)).toEqual([]);
  });

  it('Outgoing call rejected locally (busy, no permission) → client ends the call with reason failed', async () => {
    const caller = device(url);
    const callee = device(url);
    const calleeCursor = await headCursor(callee);
    const { callId, created } = await ringingCall(url, caller, callee);

    const res = await end(caller, callId, 'failed');

    expectJson(res, 200);
    expect(res.json).toEqual({ ...created.json, revision: '2', state: 'ended', endedAtMs: expect.any(Number), endReason: 'failed' });
    // For the callee it is a cancel before answer.
    expect((await getCall(callee, callId)).json.endReason).toBe('callerCancelled');
    const events = await eventsUntil(callee, calleeCursor, (e) => e.some((x) => x.type === 'call.ended'));
    expect(events.map((e) => [e.type, e.reason])).toEqual([
      ['call.invited', undefined],
      ['call.ended', 'callerCancelled'],
    ]);
  });

  it('Late, expired, cancelled, or duplicate invitation → does not ring; invitation after expiresAtMs is ignored', async () => {
    const caller = device(url);
    const callee = device(url);
    const cursor = await headCursor(callee);
    const callId = randomUUID();
    const body = { callId, calleeUserId: callee.userId, operationId: uid('op') };
    const created = await caller.api.post('/v1/calls', body);
    expect(created.status).toBe(201);
    // A retried create is not a second invitation.
    expect((await caller.api.post('/v1/calls', body)).text).toBe(created.text);
    // Cancelled.
    expect((await end(caller, callId, 'localHangup')).status).toBe(200);
    const events = await eventsUntil(callee, cursor, (e) => e.some((x) => x.type === 'call.ended'));
    const invitations = events.filter((e) => e.type === 'call.invited');
    expect(invitations).toHaveLength(1);
    // The invitation carries expiresAtMs, so a phone can ignore it once late.
    expect(invitations[0]).toMatchObject({ callId, expiresAtMs: created.json.expiresAtMs, revision: '1' });

    // An ended call is never resurrected: not by a new create of the same callId, not by an answer.
    const recreate = await caller.api.post('/v1/calls', { ...body, operationId: uid('op') });
    expectProblem(recreate, 'call_exists', 'this callId is already used by another call');
    const late = await answer(callee, callId);
    expectProblem(late, 'answer_conflict', 'the call is ended and can no longer be answered', ['snapshot']);
    expect(late.json.snapshot).toMatchObject({ state: 'ended', endReason: 'callerCancelled' });
    // No new invitation went out. Barrier: a call from the same outbox shard rings the callee; the
    // shard is relayed in order (docs/architecture.md "Relays"), so anything the refused requests had caused
    // would be in the log before its invitation.
    const barrier = sameShardCallId(callId);
    const rang = await caller.api.post('/v1/calls', { callId: barrier, calleeUserId: callee.userId, operationId: uid('op') });
    expect(rang.status, rang.text).toBe(201);
    const after = await eventsUntil(callee, cursor, (e) => e.some((x) => x.callId === barrier));
    expect(after.filter((e) => e.type === 'call.invited' && e.callId !== barrier)).toHaveLength(1);
  });
});
