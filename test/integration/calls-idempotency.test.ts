import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { stackForFile, type Stack } from '../support/stack.js';
import { acceptedCall, device, expectProblem, getCall, ringingCall, sibling, uid, type Device } from '../support/fixtures.js';
import type { ApiResponse } from '../support/http.js';
import { keys } from '../../src/redis/keys.js';

/**
 * Idempotency (docs/api.md "Idempotency", docs/protocol.md "States and
 * transitions"): create, answer and end are idempotent on (account, operationId, request
 * fingerprint). The server runs the api role only, so the shard outboxes are not drained and the
 * number of changes written for a call can be counted there.
 */

let stack: Stack;
let url: string;
stackForFile({ ROLES: 'api' }, (s) => {
  stack = s;
  url = s.url;
});

const IDEMPOTENCY_DETAIL = 'this operationId was already used with a different request';
const same = (r: ApiResponse) => [r.status, r.headers.get('content-type'), r.text];

/** The changes written to the outbox for one call (created / answered / ended). */
async function outboxChanges(callId: string): Promise<string[]> {
  const entries = await stack.redis.xrange(keys.outboxForCall({ prefix: 'cb', shards: 8 }, callId), '-', '+');
  return entries
    .map(([, fields]) => {
      const f: Record<string, string> = {};
      for (let i = 0; i < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!;
      return f;
    })
    .filter((f) => f.callId === callId)
    .map((f) => f.change!);
}

function post(d: Device, path: string, body: unknown) {
  return d.api.post(path, body);
}

describe('a replay returns the original status and body byte for byte', () => {
  it('create: the replay is the original 201 ringing snapshot even after the call was answered', async () => {
    const caller = device(url);
    const callee = device(url);
    const body = { callId: randomUUID(), calleeUserId: callee.userId, operationId: uid('op'), video: true };
    const original = await post(caller, '/v1/calls', body);
    expect(original.status).toBe(201);
    expect(original.json.video).toBe(true);
    const answered = await post(callee, `/v1/calls/${body.callId}/answer`, { operationId: uid('op'), installationId: callee.installationId });
    expect(answered.status).toBe(200);

    const replay = await post(caller, '/v1/calls', body);
    expect(same(replay)).toEqual(same(original));
    // From another installation of the same account too (the account owns the operationId).
    const replayElsewhere = await post(sibling(url, caller), '/v1/calls', body);
    expect(same(replayElsewhere)).toEqual(same(original));
    expect(await outboxChanges(body.callId)).toEqual(['created', 'answered']);
  });

  it('create: the replay is byte-identical for a display name with multi-byte, escaped and control characters', async () => {
    const name = 'Zoë "Z" 😀 \\ / \u0007 <b>&amp;</b> 中文';
    const caller = device(url, uid('user'), uid('inst'), name);
    const body = { callId: randomUUID(), calleeUserId: uid('callee'), operationId: uid('op') };
    const original = await post(caller, '/v1/calls', body);
    expect(original.status).toBe(201);
    expect(original.json.caller.displayName).toBe(name);
    const replay = await post(caller, '/v1/calls', body);
    expect(same(replay)).toEqual(same(original));
    expect((await getCall(caller, body.callId)).text).toBe(original.text);
  });

  it('answer: the replay is the original 200 even after the call ended; a loser’s replay is its original 409', async () => {
    const { callId, caller, callee } = await ringingCall(url);
    const loser = sibling(url, callee);
    const winBody = { operationId: uid('op'), installationId: callee.installationId };
    const loseBody = { operationId: uid('op'), installationId: loser.installationId };
    const won = await post(callee, `/v1/calls/${callId}/answer`, winBody);
    const lost = await post(loser, `/v1/calls/${callId}/answer`, loseBody);
    expect([won.status, lost.status]).toEqual([200, 409]);
    const ended = await post(caller, `/v1/calls/${callId}/end`, { operationId: uid('op'), reason: 'localHangup' });
    expect(ended.json.state).toBe('ended');

    expect(same(await post(callee, `/v1/calls/${callId}/answer`, winBody))).toEqual(same(won));
    expect(same(await post(loser, `/v1/calls/${callId}/answer`, loseBody))).toEqual(same(lost));
    expect(await outboxChanges(callId)).toEqual(['created', 'answered', 'ended']);
  });

  it('answer: a revision_conflict replays as the same 409 even after the call was answered', async () => {
    const { callId, callee } = await ringingCall(url);
    const body = { operationId: uid('op'), installationId: callee.installationId, expectedRevision: '5' };
    const conflict = await post(callee, `/v1/calls/${callId}/answer`, body);
    expect(conflict.json.code).toBe('revision_conflict');
    const ok = await post(callee, `/v1/calls/${callId}/answer`, { operationId: uid('op'), installationId: callee.installationId });
    expect(ok.status).toBe(200);
    expect(same(await post(callee, `/v1/calls/${callId}/answer`, body))).toEqual(same(conflict));
  });

  it('end: the replay is the original terminal snapshot; an end that changed nothing replays as it was', async () => {
    const { callId, caller, callee, answered } = await acceptedCall(url);
    const echoBody = { operationId: uid('op'), reason: 'remoteEnded' };
    const echo = await post(caller, `/v1/calls/${callId}/end`, echoBody);
    expect(echo.text).toBe(answered.text);
    const endBody = { operationId: uid('op'), reason: 'localHangup' };
    const ended = await post(callee, `/v1/calls/${callId}/end`, endBody);
    expect(ended.json).toMatchObject({ state: 'ended', endReason: 'localHangup', revision: '3' });

    expect(same(await post(callee, `/v1/calls/${callId}/end`, endBody))).toEqual(same(ended));
    // The echo's outcome was the accepted snapshot, and stays so.
    expect(same(await post(caller, `/v1/calls/${callId}/end`, echoBody))).toEqual(same(echo));
    expect(await outboxChanges(callId)).toEqual(['created', 'answered', 'ended']);
  });
});

describe('the same operationId with a different payload → 409 idempotency_conflict', () => {
  it('create: another calleeUserId, another video flag, or another callId', async () => {
    const caller = device(url);
    const body = { callId: randomUUID(), calleeUserId: uid('callee'), operationId: uid('op') };
    const original = await post(caller, '/v1/calls', body);
    expect(original.status).toBe(201);

    expectProblem(await post(caller, '/v1/calls', { ...body, calleeUserId: uid('someone-else') }), 'idempotency_conflict', IDEMPOTENCY_DETAIL);
    expectProblem(await post(caller, '/v1/calls', { ...body, video: true }), 'idempotency_conflict', IDEMPOTENCY_DETAIL);
    const otherCallId = randomUUID();
    expectProblem(await post(caller, '/v1/calls', { ...body, callId: otherCallId }), 'idempotency_conflict', IDEMPOTENCY_DETAIL);
    // Nothing was created for the other callId, and the original still replays.
    expect((await getCall(caller, otherCallId)).status).toBe(404);
    expect(await outboxChanges(otherCallId)).toEqual([]);
    expect(same(await post(caller, '/v1/calls', body))).toEqual(same(original));
    expect(await outboxChanges(body.callId)).toEqual(['created']);
  });

  it('answer: another expectedRevision, or the same operationId on another call', async () => {
    const first = await ringingCall(url);
    const second = await ringingCall(url, device(url), first.callee);
    const body = { operationId: uid('op'), installationId: first.callee.installationId, expectedRevision: '1' };
    const won = await post(first.callee, `/v1/calls/${first.callId}/answer`, body);
    expect(won.status).toBe(200);

    expectProblem(
      await post(first.callee, `/v1/calls/${first.callId}/answer`, { ...body, expectedRevision: '2' }),
      'idempotency_conflict',
      IDEMPOTENCY_DETAIL,
    );
    expectProblem(
      await post(first.callee, `/v1/calls/${first.callId}/answer`, { operationId: body.operationId, installationId: body.installationId }),
      'idempotency_conflict',
      IDEMPOTENCY_DETAIL,
    );
    expectProblem(await post(first.callee, `/v1/calls/${second.callId}/answer`, body), 'idempotency_conflict', IDEMPOTENCY_DETAIL);
    // The second call still rings.
    expect((await getCall(second.caller, second.callId)).text).toBe(second.created.text);
    expect(await outboxChanges(second.callId)).toEqual(['created']);
  });

  it('end: another reason, or the same operationId on another call', async () => {
    const caller = device(url);
    const first = await ringingCall(url, caller);
    const second = await ringingCall(url, caller);
    const body = { operationId: uid('op'), reason: 'localHangup' };
    const ended = await post(caller, `/v1/calls/${first.callId}/end`, body);
    expect(ended.status).toBe(200);

    expectProblem(await post(caller, `/v1/calls/${first.callId}/end`, { ...body, reason: 'failed' }), 'idempotency_conflict', IDEMPOTENCY_DETAIL);
    expectProblem(await post(caller, `/v1/calls/${second.callId}/end`, body), 'idempotency_conflict', IDEMPOTENCY_DETAIL);
    expect((await getCall(caller, second.callId)).text).toBe(second.created.text);
    expect(await outboxChanges(second.callId)).toEqual(['created']);
  });

  it('an operationId used for one action cannot be reused for another action', async () => {
    const caller = device(url);
    const callee = device(url);
    const callId = randomUUID();
    const operationId = uid('op');
    expect((await post(caller, '/v1/calls', { callId, calleeUserId: callee.userId, operationId })).status).toBe(201);
    expectProblem(await post(caller, `/v1/calls/${callId}/end`, { operationId, reason: 'localHangup' }), 'idempotency_conflict', IDEMPOTENCY_DETAIL);
    expect((await getCall(caller, callId)).json.state).toBe('ringing');
  });

  it('a request refused before it changed anything (unknown call, not a party, the wrong side) leaves its operationId unused', async () => {
    const { callId, caller, callee } = await ringingCall(url);
    const stranger = device(url);
    // Unknown call (404), then the same operationId answers a real call.
    const unknown = uid('op');
    expectProblem(await post(callee, `/v1/calls/${randomUUID()}/answer`, { operationId: unknown, installationId: callee.installationId }), 'not_found', 'call not found');
    // Not a party (404): the stranger's operationId then creates a call of its own.
    const notParty = uid('op');
    expect((await post(stranger, `/v1/calls/${callId}/end`, { operationId: notParty, reason: 'localHangup' })).status).toBe(404);
    expect((await post(stranger, '/v1/calls', { callId: randomUUID(), calleeUserId: uid('callee'), operationId: notParty })).status).toBe(201);
    // The wrong side (403): the caller cannot answer, the callee cannot rename; each operationId
    // then serves that user's own request.
    const callerOp = uid('op');
    expect((await post(caller, `/v1/calls/${callId}/answer`, { operationId: callerOp, installationId: caller.installationId })).status).toBe(403);
    const calleeOp = uid('op');
    expect((await post(callee, `/v1/calls/${callId}/rename`, { operationId: calleeOp, displayName: 'Not mine' })).status).toBe(403);
    expect((await post(callee, `/v1/calls/${callId}/answer`, { operationId: unknown, installationId: callee.installationId })).status).toBe(200);
    expect((await post(caller, `/v1/calls/${callId}/rename`, { operationId: callerOp, displayName: 'Renamed' })).status).toBe(200);
    expect((await post(callee, `/v1/calls/${callId}/end`, { operationId: calleeOp, reason: 'localHangup' })).status).toBe(200);
    expect(await outboxChanges(callId)).toEqual(['created', 'answered', 'renamed', 'ended']);
  });

  it('operationIds belong to one account: another user may use the same operationId', async () => {
    const caller = device(url);
    const callee = device(url);
    const callId = randomUUID();
    const operationId = uid('shared-op');
    const created = await post(caller, '/v1/calls', { callId, calleeUserId: callee.userId, operationId });
    expect(created.status).toBe(201);
    const answered = await post(callee, `/v1/calls/${callId}/answer`, { operationId, installationId: callee.installationId });
    expect(answered.status).toBe(200);
    expect(answered.json.state).toBe('accepted');
  });
});

describe('concurrency', () => {
  it('concurrent replays of one create with the same operationId → one call, all responses byte-identical (201, same body)', async () => {
    const caller = device(url);
    const body = { callId: randomUUID(), calleeUserId: uid('callee'), operationId: uid('op') };

    const results = await Promise.all(Array.from({ length: 20 }, () => post(caller, '/v1/calls', body)));

    for (const r of results) expect(same(r)).toEqual([201, 'application/json', results[0]!.text]);
    expect(results[0]!.json).toMatchObject({ callId: body.callId, revision: '1', state: 'ringing' });
    expect(await outboxChanges(body.callId)).toEqual(['created']);
    expect((await getCall(caller, body.callId)).text).toBe(results[0]!.text);
  });

  it('concurrent creates of one callId with different operationIds → one 201, the others 409 call_exists', async () => {
    const caller = device(url);
    const callee = device(url);
    const callId = randomUUID();

    const results = await Promise.all(
      Array.from({ length: 10 }, () => post(caller, '/v1/calls', { callId, calleeUserId: callee.userId, operationId: uid('op') })),
    );

    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 201)) {
      expectProblem(r, 'call_exists', 'this callId is already used by another call');
    }
    expect(await outboxChanges(callId)).toEqual(['created']);
  });

  it('a callId is never reused: another caller creating it gets 409 call_exists and learns nothing about the call', async () => {
    const { callId, caller, created } = await ringingCall(url);
    const other = device(url);
    const res = await post(other, '/v1/calls', { callId, calleeUserId: uid('callee'), operationId: uid('op') });
    expectProblem(res, 'call_exists', 'this callId is already used by another call');
    expect((await getCall(caller, callId)).text).toBe(created.text);
  });
});
