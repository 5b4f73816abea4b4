import { describe, expect, it } from 'vitest';
import { stackForFile, type Stack } from '../support/stack.js';
import { answer, device, end, expectJson, expectProblem, getCall, ringingCall, sleep, type CallPair } from '../support/fixtures.js';
import { keys } from '../../src/redis/keys.js';
import { storedCallFields } from '../support/callRecords.js';

/**
 * Lazy expiry (docs/protocol.md "States and transitions", "Limits"): with the shortest
 * ring timeout (RING_TIMEOUT_MS=1000) and the api role only (no worker, so no timer of any kind
 * runs), a call past expiresAtMs is still stored as ringing, yet every request sees it ended as
 * `unanswered`: the Lua scripts end it on first touch.
 */

const RING_TIMEOUT_MS = 1000;
let stack: Stack;
let url: string;
const calls: Record<'get' | 'answer' | 'endByCaller' | 'endByCallee', CallPair> = {} as never;

stackForFile({ ROLES: 'api', RING_TIMEOUT_MS: String(RING_TIMEOUT_MS), HANDLE_SCHEME: 'acme' }, async (s) => {
  stack = s;
  url = s.url;
  for (const name of ['get', 'answer', 'endByCaller', 'endByCallee'] as const) calls[name] = await ringingCall(url);
  const last = Math.max(...Object.values(calls).map((c) => c.created.json.expiresAtMs as number));
  await sleep(last - Date.now() + 150);
});

const stored = (callId: string) => storedCallFields(stack.redis, keys.call({ prefix: 'cb', shards: 8 }, callId));

/** Past expiresAtMs, nothing has ended the call in Redis yet: there is no timer. */
async function expectStillStoredAsRinging(c: CallPair): Promise<void> {
  expect(Date.now()).toBeGreaterThan(c.created.json.expiresAtMs);
  const h = await stored(c.callId);
  expect(h.state).toBe('ringing');
  expect(h.revision).toBe('1');
}

describe('lazy expiry (no timer)', () => {
  it('expiresAtMs − createdAtMs equals RING_TIMEOUT_MS, and the handle uses HANDLE_SCHEME', () => {
    for (const c of Object.values(calls)) {
      expect(c.created.json.expiresAtMs - c.created.json.createdAtMs).toBe(RING_TIMEOUT_MS);
      expect(c.created.json.caller.handle).toBe(`acme:${c.caller.userId}`);
    }
  });

  it('a call past expiresAtMs is reported ended with endReason unanswered by GET, to both sides', async () => {
    const c = calls.get;
    await expectStillStoredAsRinging(c);

    const res = await getCall(c.caller, c.callId);

    expectJson(res, 200);
    expect(res.json).toEqual({ ...c.created.json, revision: '2', state: 'ended', endedAtMs: expect.any(Number), endReason: 'unanswered' });
    expect(res.json.endedAtMs).toBeGreaterThanOrEqual(c.created.json.expiresAtMs);
    expect((await getCall(c.callee, c.callId)).text).toBe(res.text);
    const h = await stored(c.callId);
    expect(h).toMatchObject({ state: 'ended', endReason: 'unanswered', endedBy: 'system', revision: '2' });
  });

  it('an answer after expiry gets 409 answer_conflict with the ended snapshot', async () => {
    const c = calls.answer;
    await expectStillStoredAsRinging(c);

    const res = await answer(c.callee, c.callId);

    expectProblem(res, 'answer_conflict', 'the call is ended and can no longer be answered', ['snapshot']);
    expect(res.json.snapshot).toEqual({ ...c.created.json, revision: '2', state: 'ended', endedAtMs: expect.any(Number), endReason: 'unanswered' });
    const h = await stored(c.callId);
    expect(h.state).toBe('ended');
    expect(h.answeredByInstallationId).toBeUndefined();
    expect((await getCall(c.caller, c.callId)).text).toBe(JSON.stringify(res.json.snapshot));
  });

  it.each([
    ['caller', 'end', 'endByCaller', 'localHangup'],
    ['callee', 'decline', 'endByCallee', 'declined'],
  ] as const)('the %s’s %s after expiry returns the terminal unanswered snapshot (the ring timeout ended it first)', async (side, _, call, reason) => {
    const c = calls[call];
    const [ender, other] = side === 'caller' ? [c.caller, c.callee] : [c.callee, c.caller];
    await expectStillStoredAsRinging(c);
    const res = await end(ender, c.callId, reason);
    expectJson(res, 200);
    expect(res.json).toMatchObject({ state: 'ended', endReason: 'unanswered', revision: '2' });
    expect((await getCall(other, c.callId)).json.endReason).toBe('unanswered');
  });

  it('a call before expiresAtMs still rings and can be answered', async () => {
    const c = await ringingCall(url, device(url), device(url));
    const res = await answer(c.callee, c.callId);
    expectJson(res, 200);
    expect(res.json.state).toBe('accepted');
    // Once accepted, the ring deadline no longer applies.
    await sleep(c.created.json.expiresAtMs - Date.now() + 100);
    expect((await getCall(c.caller, c.callId)).text).toBe(res.text);
  });
});
