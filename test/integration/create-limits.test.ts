import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { stackForFile, type Stack } from '../support/stack.js';
import { device, expectProblem, uid, type Device } from '../support/fixtures.js';
import type { ApiResponse } from '../support/http.js';
import { keys } from '../../src/redis/keys.js';
import { sleep } from '../support/wait.js';

/**
 * A create's rate limits (docs/api.md "Abuse limits"): the caller's creates
 * (RATE_CALL_CREATES_PER_MIN) and each invitee's invitations (RATE_INVITES_PER_CALLEE_PER_MIN).
 * On a single Redis the create's script hits them as its first step
 * (lua/includes/createLimits.lua), on a cluster separate calls do before it; either way a create
 * over one gets 429 with Retry-After and changes nothing but the counters: no call, no binding,
 * so the same request after the window is a new one. Every counter is hit, even after one
 * refuses, and every create counts, a replay too. An invite into a group call counts toward each
 * invitee's invitations the same way (lua/inviteToCall.lua).
 */

const LIMIT = 2;
const KS = { prefix: 'cb', shards: 8 };

let stack: Stack;
/** A server on the same Redis with the caller's limit off (0) and the callee's on. */
let invitesOnlyUrl: string;
stackForFile({ RATE_CALL_CREATES_PER_MIN: String(LIMIT), RATE_INVITES_PER_CALLEE_PER_MIN: String(LIMIT) }, async (s) => {
  stack = s;
  invitesOnlyUrl = (await s.addServer({ RATE_CALL_CREATES_PER_MIN: '0', RATE_INVITES_PER_CALLEE_PER_MIN: String(LIMIT) })).url;
});

interface Create {
  callId: string;
  operationId: string;
  body: Record<string, unknown>;
}

const oneToOne = (callee: Device): Create => {
  const callId = randomUUID();
  const operationId = uid('op');
  return { callId, operationId, body: { callId, calleeUserId: callee.userId, operationId } };
};

const group = (invitees: Device[]): Create => {
  const callId = randomUUID();
  const operationId = uid('op');
  return { callId, operationId, body: { callId, calleeUserIds: invitees.map((d) => d.userId), operationId } };
};

const post = (caller: Device, c: Create): Promise<ApiResponse> => caller.api.post('/v1/calls', c.body);

async function created(caller: Device, c: Create): Promise<void> {
  const res = await post(caller, c);
  expect(res.status, res.text).toBe(201);
}

const createCounter = (d: Device) => keys.callCreateLimit(KS, d.userId);
const inviteCounter = (d: Device) => keys.inviteLimit(KS, d.userId);
const count = async (key: string) => Number((await stack.redis.get(key)) ?? 0);

/** A refused create: 429 with the limit's detail and its window's rest as Retry-After, and nothing stored. */
async function refused(caller: Device, c: Create, detail: string, counter: string): Promise<void> {
  const res = await post(caller, c);
  const rest = await stack.redis.pttl(counter);
  expectProblem(res, 'rate_limited', detail);
  // The refusing counter's rest, in whole seconds rounded up (read a moment after the refusal).
  expect(rest).toBeGreaterThan(0);
  const retryAfter = Number(res.headers.get('retry-after'));
  expect(retryAfter).toBeGreaterThanOrEqual(Math.ceil(rest / 1000));
  expect(retryAfter).toBeLessThanOrEqual(Math.ceil((rest + 1000) / 1000));
  expect(await stack.redis.exists(keys.call(KS, c.callId))).toBe(0);
  expect(await stack.redis.exists(keys.operationBinding(KS, caller.userId, c.operationId))).toBe(0);
  expect(await stack.redis.exists(keys.operation(KS, c.callId, caller.userId, c.operationId))).toBe(0);
  expect((await caller.api.get(`/v1/calls/${c.callId}`)).status).toBe(404);
}

/** The window ends (its counter expires), as it would a minute after its first hit. */
async function windowEnds(counter: string): Promise<void> {
  await stack.redis.pexpire(counter, 1);
  await sleep(20);
  expect(await stack.redis.exists(counter)).toBe(0);
}

describe('create limits', () => {
  it('a first hit opens a window: each counter is set to 1 with the window as its expiry', async () => {
    const caller = device(stack.url);
    const callee = device(stack.url);
    await created(caller, oneToOne(callee));
    for (const counter of [createCounter(caller), inviteCounter(callee)]) {
      expect(await count(counter)).toBe(1);
      const ttl = await stack.redis.pttl(counter);
      expect(ttl).toBeGreaterThan(50_000);
      expect(ttl).toBeLessThanOrEqual(60_000);
    }
  });

  it('every create counts, a replay too', async () => {
    const caller = device(stack.url);
    const callee = device(stack.url);
    const c = oneToOne(callee);
    await created(caller, c);
    const replay = await post(caller, c);
    expect(replay.status, replay.text).toBe(201);
    expect(await count(createCounter(caller))).toBe(2);
    expect(await count(inviteCounter(callee))).toBe(2);
  });

  it("over the caller's limit: 429, nothing stored, the callee's counter hit all the same; after the window the same request is a new create", async () => {
    const caller = device(stack.url);
    for (let i = 0; i < LIMIT; i++) await created(caller, oneToOne(device(stack.url)));
    const callee = device(stack.url);
    const over = oneToOne(callee);
    await refused(caller, over, 'too many calls created by this user; retry later', createCounter(caller));
    expect(await count(createCounter(caller))).toBe(LIMIT + 1);
    expect(await count(inviteCounter(callee))).toBe(1);
    await windowEnds(createCounter(caller));
    const again = await post(caller, over);
    expect(again.status, again.text).toBe(201);
    expect(again.json).toMatchObject({ callId: over.callId, state: 'ringing' });
  });

  it("over the callee's limit: 429, nothing stored, the caller's counter hit all the same; after the window the same request is a new create", async () => {
    const callee = device(stack.url);
    for (let i = 0; i < LIMIT; i++) await created(device(stack.url), oneToOne(callee));
    const caller = device(stack.url);
    const over = oneToOne(callee);
    await refused(caller, over, 'this callee is receiving too many calls; retry later', inviteCounter(callee));
    expect(await count(createCounter(caller))).toBe(1);
    await windowEnds(inviteCounter(callee));
    const again = await post(caller, over);
    expect(again.status, again.text).toBe(201);
    expect(again.json).toMatchObject({ callId: over.callId, state: 'ringing' });
  });

  it('a group create with one invitee over its limit: 429, nothing stored, every counter hit; after the window it is a new create', async () => {
    const busyOne = device(stack.url);
    for (let i = 0; i < LIMIT; i++) await created(device(stack.url), oneToOne(busyOne));
    const caller = device(stack.url);
    const other = device(stack.url);
    const over = group([other, busyOne]);
    await refused(caller, over, 'a callee is receiving too many calls; retry later', inviteCounter(busyOne));
    expect(await count(createCounter(caller))).toBe(1);
    expect(await count(inviteCounter(other))).toBe(1);
    expect(await count(inviteCounter(busyOne))).toBe(LIMIT + 1);
    await windowEnds(inviteCounter(busyOne));
    const again = await post(caller, over);
    expect(again.status, again.text).toBe(201);
    expect(again.json).toMatchObject({ callId: over.callId, state: 'ringing' });
    expect((again.json.participants as { userId: string }[]).map((p) => p.userId)).toEqual([caller.userId, other.userId, busyOne.userId]);
  });

  it("an invite counts toward each invitee's limit, a replay too: over it 429 and the call unchanged; after the window the same invite is taken", async () => {
    const caller = device(invitesOnlyUrl);
    const g = group([device(invitesOnlyUrl)]);
    await created(caller, g);
    const late = device(invitesOnlyUrl);
    const other = device(invitesOnlyUrl);
    const invite = (operationId: string) => caller.api.post(`/v1/calls/${g.callId}/invite`, { userIds: [other.userId, late.userId], operationId });
    const first = uid('op');
    expect((await invite(first)).status).toBe(200);
    expect((await invite(first)).status).toBe(200);
    expect(await count(inviteCounter(late))).toBe(LIMIT);
    const before = (await caller.api.get(`/v1/calls/${g.callId}`)).json;
    const over = uid('op');
    const res = await invite(over);
    expectProblem(res, 'rate_limited', 'a callee is receiving too many calls; retry later');
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await count(inviteCounter(other))).toBe(LIMIT + 1);
    expect((await caller.api.get(`/v1/calls/${g.callId}`)).json).toEqual(before);
    expect(await stack.redis.exists(keys.operationBinding(KS, caller.userId, over))).toBe(0);
    await windowEnds(inviteCounter(late));
    await windowEnds(inviteCounter(other));
    const again = await invite(over);
    expect(again.status, again.text).toBe(200);
  });

  it('a limit that is off is not hit; the one that is on still refuses', async () => {
    const callee = device(invitesOnlyUrl);
    const callers = Array.from({ length: LIMIT + 1 }, () => device(invitesOnlyUrl));
    for (const caller of callers.slice(0, LIMIT)) await created(caller, oneToOne(callee));
    const last = callers[LIMIT]!;
    await refused(last, oneToOne(callee), 'this callee is receiving too many calls; retry later', inviteCounter(callee));
    for (const caller of callers) expect(await stack.redis.exists(createCounter(caller))).toBe(0);
  });
});
