import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { stackForFile, type Stack } from '../support/stack.js';
import { device, ringingCall, uid, type Device } from '../support/fixtures.js';
import { keys } from '../../src/redis/keys.js';
import { parseCallFields } from '../../src/calls/model.js';

/**
 * A rolling upgrade from a version that reads calls only as hashes (docs/operations.md
 * "Upgrading"): with CALL_RECORD_FORMAT=hash new calls are hashes, and a call keeps the form it
 * was created in through every write, whichever process makes it, so a process of the earlier
 * version can read it at every step (as it does: HGETALL, every field). Then, with every process
 * upgraded, `string` is switched on server by server: the hash server and the string server run
 * side by side here, as they do during that second roll.
 */

const KS = { prefix: 'cb', shards: 8 };

let stack: Stack;
/** The second step's server: calls it creates are strings. */
let stringUrl: string;
stackForFile({ CALL_RECORD_FORMAT: 'hash' }, async (s) => {
  stack = s;
  stringUrl = (await s.addServer({ CALL_RECORD_FORMAT: 'string' })).url;
});

const callKey = (callId: string) => keys.call(KS, callId);

/** The call as a process of the earlier version reads it: one HGETALL of a hash. */
async function readAsEarlierVersion(callId: string) {
  expect(await stack.redis.type(callKey(callId))).toBe('hash');
  const fields = await stack.redis.hgetall(callKey(callId));
  return parseCallFields(Object.entries(fields).flat());
}

const answer = (callee: Device, callId: string) => callee.api.post(`/v1/calls/${callId}/answer`, { operationId: uid('op'), installationId: callee.installationId });
const end = (d: Device, callId: string, reason: string) => d.api.post(`/v1/calls/${callId}/end`, { operationId: uid('op'), reason });

describe('CALL_RECORD_FORMAT=hash', () => {
  it('is said at start, as a step to leave', () => {
    const said = (i: number) => stack.servers[i]!.logs().includes('CALL_RECORD_FORMAT is hash');
    expect([said(0), said(1)]).toEqual([true, false]);
  });

  it('a call is a hash an earlier version reads after each change, with its lifetime; the API reads it the same', async () => {
    const { callId, caller, callee } = await ringingCall(stack.url);
    expect(await readAsEarlierVersion(callId)).toMatchObject({ callId, state: 'ringing', revision: '1', callerUserId: caller.userId, calleeUserId: callee.userId });
    const ringingTtl = await stack.redis.pttl(callKey(callId));
    expect(ringingTtl).toBeGreaterThan(40_000);

    expect((await answer(callee, callId)).status).toBe(200);
    expect(await readAsEarlierVersion(callId)).toMatchObject({ state: 'accepted', revision: '2', answeredByInstallationId: callee.installationId });
    // The answer keeps the lifetime the create gave.
    expect(await stack.redis.pttl(callKey(callId))).toBeGreaterThan(ringingTtl - 10_000);

    expect((await end(caller, callId, 'localHangup')).status).toBe(200);
    const ended = await readAsEarlierVersion(callId);
    expect(ended).toMatchObject({ state: 'ended', revision: '3', endReason: 'localHangup', endedBy: 'caller' });
    const snapshot = await caller.api.get(`/v1/calls/${callId}`);
    expect(snapshot.status).toBe(200);
    expect(snapshot.json).toMatchObject({ callId, state: 'ended', revision: ended.revision });
  });

  it('a create whose callId is in use is refused and changes nothing; the first create\'s replay answers as it did', async () => {
    const [caller, callee] = [device(stack.url), device(stack.url)];
    const callId = randomUUID();
    const create = { callId, calleeUserId: callee.userId, operationId: uid('op') };
    const first = await caller.api.post('/v1/calls', create);
    expect(first.status, first.text).toBe(201);
    const stored = await stack.redis.hgetall(callKey(callId));
    const taken = await device(stack.url).api.post('/v1/calls', { ...create, operationId: uid('op') });
    expect(taken.status, taken.text).toBe(409);
    expect(taken.json).toMatchObject({ code: 'call_exists' });
    expect(await stack.redis.hgetall(callKey(callId))).toEqual(stored);
    const replay = await caller.api.post('/v1/calls', create);
    expect(replay.status).toBe(201);
    expect(replay.json).toEqual(first.json);
  });

  it('a group call is a hash too, its members with it, through joins and its end', async () => {
    const caller = device(stack.url);
    const [a, b] = [device(stack.url), device(stack.url)];
    const callId = randomUUID();
    const created = await caller.api.post('/v1/calls', { callId, calleeUserIds: [a.userId, b.userId], operationId: uid('op'), title: 'Standup' });
    expect(created.status, created.text).toBe(201);
    expect(await readAsEarlierVersion(callId)).toMatchObject({ kind: 'group', title: 'Standup', members: [{ userId: caller.userId, state: 'joined' }, { userId: a.userId, state: 'invited' }, { userId: b.userId, state: 'invited' }] });
    expect((await answer(a, callId)).status).toBe(200);
    expect(await readAsEarlierVersion(callId)).toMatchObject({ state: 'accepted', members: [{ state: 'joined' }, { userId: a.userId, state: 'joined' }, { state: 'invited' }] });
    // The caller leaves; with one member left in it the call ends (docs/group-calls.md).
    expect((await end(caller, callId, 'localHangup')).status).toBe(200);
    expect(await readAsEarlierVersion(callId)).toMatchObject({ state: 'ended', members: [{ state: 'left' }, { state: 'left' }, { userId: b.userId, state: 'missed' }] });
  });

  it('then, during the switch to string: each call keeps its form, whichever server changes it', async () => {
    // Created on the hash server, answered and ended through the string server.
    const hashCall = await ringingCall(stack.url);
    expect((await answer({ ...hashCall.callee, api: device(stringUrl, hashCall.callee.userId, hashCall.callee.installationId).api }, hashCall.callId)).status).toBe(200);
    expect(await readAsEarlierVersion(hashCall.callId)).toMatchObject({ state: 'accepted', revision: '2' });
    const viaString = device(stringUrl, hashCall.caller.userId, hashCall.caller.installationId);
    expect((await end(viaString, hashCall.callId, 'localHangup')).status).toBe(200);
    expect(await readAsEarlierVersion(hashCall.callId)).toMatchObject({ state: 'ended', revision: '3' });

    // Created on the string server: a string, and still one after the hash server answers it.
    const stringCall = await ringingCall(stringUrl);
    expect(await stack.redis.type(callKey(stringCall.callId))).toBe('string');
    expect((await answer(device(stack.url, stringCall.callee.userId, stringCall.callee.installationId), stringCall.callId)).status).toBe(200);
    expect(await stack.redis.type(callKey(stringCall.callId))).toBe('string');
    const snapshot = await stringCall.caller.api.get(`/v1/calls/${stringCall.callId}`);
    expect(snapshot.json).toMatchObject({ state: 'accepted', revision: '2' });
  });
});
