import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Cluster, Redis } from 'ioredis';
import { ON_CLUSTER } from '../support/stack.js';
import { CallingClient, ProblemError } from '@calling-backend/client';
import { device, eventsUntil, expectProblem, headCursor, uid, type Device } from '../support/fixtures.js';
import { api } from '../support/http.js';
import { newServerKey } from '../../src/auth/serverKeys.js';
import { keys } from '../../src/redis/keys.js';
import { Sockets, online, waitUntil } from './helpers.js';
import { androidToken, iosToken, pushesSettled, pushStackForFile, registerAndroid, registerIos, type PushStack } from './push-helpers.js';
import type { TestServer } from '../support/server.js';
import { sleep } from '../support/wait.js';

/**
 * Who may call a user (docs/call-policy.md): the routes for the user and for the app's backend,
 * and the create's script keeping a blocked, `nobody` or not-on-contacts call from ringing: no
 * invitation, push or event reaches the callee, the caller sees a ring-out, and the callee's
 * history says why.
 */

const RING_MS = 1_500;
const server = newServerKey();
const ks = { prefix: 'cb', shards: 8 };
let ps: PushStack;
let url: string;
let redis: Redis;
let busyReply: TestServer;
pushStackForFile(
  [],
  (stack) => {
    ps = stack;
    url = stack.url;
    redis = stack.stack.redis;
  },
  // No rate limits: a test makes a hundred calls to one callee within a minute.
  { SERVER_API_KEYS: server.hash, RING_TIMEOUT_MS: String(RING_MS), RATE_CALL_CREATES_PER_MIN: '0', RATE_INVITES_PER_CALLEE_PER_MIN: '0' },
);
const sockets = Sockets.closedAfterEachTest();
const backend = () => api(url, server.key);

/** A callee with a socket, an iPhone and an Android phone: every way a call could reach it. */
async function reachableCallee(): Promise<{ socket: Awaited<ReturnType<typeof online>>[number]; ios: string; android: string; userId: string; d: Device }> {
  const d = device(url);
  const ios = iosToken();
  const android = androidToken();
  await registerIos(device(url, d.userId), ios);
  await registerAndroid(device(url, d.userId), android);
  const [socket] = sockets.add(await online([d], url.replace(/^http/, 'ws')));
  return { socket: socket!, ios, android, userId: d.userId, d };
}

const pushesTo = (token: string) => ps.apns.requests.filter((r) => r.token === token).length + ps.fcm.messages.filter((m) => m.token === token).length;

async function create(caller: Device, calleeUserId: string) {
  const callId = randomUUID();
  const res = await caller.api.post('/v1/calls', { callId, calleeUserId, operationId: uid('op') });
  expect(res.status, res.text).toBe(201);
  return { callId, res };
}

const DND_OFF = { on: false, untilMs: null, action: 'silence', favouriteUserIds: [] };

describe('routes', () => {
  it('a user reads and edits only their own policy; the server key edits any user\'s', async () => {
    const bob = device(url);
    expect((await bob.api.get('/v1/call-policy')).json).toEqual({ userId: bob.userId, mode: 'everyone', blockedUserIds: [], allowListSize: 0, doNotDisturb: DND_OFF });
    const r = await bob.api.put('/v1/call-policy', { mode: 'contacts', block: ['mallory', 'eve'] });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual({ userId: bob.userId, mode: 'contacts', blockedUserIds: ['mallory', 'eve'], allowListSize: 0, doNotDisturb: DND_OFF });
    const again = await bob.api.put('/v1/call-policy', { unblock: ['eve'], block: ['mallory'] });
    expect(again.json.blockedUserIds).toEqual(['mallory']);
    // The server API sees and edits the same policy.
    expect((await backend().get(`/v1/server/users/${bob.userId}/call-policy`)).json).toEqual(again.json);
    expect((await backend().put(`/v1/server/users/${bob.userId}/call-policy`, { mode: 'everyone', unblock: ['mallory'] })).json).toMatchObject({ mode: 'everyone', blockedUserIds: [] });
  });

  it('the client package reads and edits the policy (CallingClient.callPolicy, editCallPolicy)', async () => {
    const bob = device(url);
    const client = new CallingClient({ baseUrl: url, token: bob.token });
    expect(await client.callPolicy()).toEqual({ userId: bob.userId, mode: 'everyone', blockedUserIds: [], allowListSize: 0, doNotDisturb: DND_OFF });
    expect(await client.editCallPolicy({ mode: 'nobody', block: ['mallory'], doNotDisturb: { on: true, action: 'reject' }, favourite: ['mum'] })).toEqual({
      userId: bob.userId,
      mode: 'nobody',
      blockedUserIds: ['mallory'],
      allowListSize: 0,
      doNotDisturb: { on: true, untilMs: null, action: 'reject', favouriteUserIds: ['mum'] },
    });
    const refused = await client.editCallPolicy({ block: [bob.userId] }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ProblemError);
    expect((refused as ProblemError).code).toBe('invalid_request');
  });

  it('auth matrix: device routes refuse the server key, server routes refuse a device token, no credential is 401', async () => {
    const bob = device(url);
    const serverPaths = [`/v1/server/users/${bob.userId}/call-policy`, `/v1/server/users/${bob.userId}/allow-list`];
    for (const path of serverPaths) {
      expectProblem(await bob.api.put(path, {}), 'forbidden', /device session token/);
      expectProblem(await api(url).put(path, {}), 'unauthorized', /missing Authorization/);
    }
    expectProblem(await bob.api.get(serverPaths[0]!), 'forbidden', /device session token/);
    expectProblem(await backend().get('/v1/call-policy'), 'forbidden', /server API key/);
    expectProblem(await backend().put('/v1/call-policy', { mode: 'nobody' }), 'forbidden', /server API key/);
    expectProblem(await api(url).get('/v1/call-policy'), 'unauthorized', /missing Authorization/);
    // Only the token's own user: no route takes another user's id.
    expect((await bob.api.get('/v1/call-policy')).json.mode).toBe('everyone');
  });

  it('bad input is 400 with a problem code and changes nothing', async () => {
    const bob = device(url);
    await bob.api.put('/v1/call-policy', { block: ['x'] });
    const before = (await bob.api.get('/v1/call-policy')).json;
    expectProblem(await bob.api.put('/v1/call-policy', { mode: 'friends' }), 'invalid_request', /mode/);
    expectProblem(await bob.api.put('/v1/call-policy', { block: ['a'.repeat(129)] }), 'invalid_request', /block/);
    expectProblem(await bob.api.put('/v1/call-policy', { block: Array.from({ length: 1001 }, (_, i) => `u${i}`) }), 'invalid_request', /1000/);
    expectProblem(await bob.api.put('/v1/call-policy', { block: [bob.userId] }), 'invalid_request', /yourself/);
    expectProblem(await backend().put(`/v1/server/users/${bob.userId}/allow-list`, { replaceId: 'r', page: -1, userIds: [], last: true }), 'invalid_request', /page/);
    expectProblem(await backend().put(`/v1/server/users/${bob.userId}/allow-list`, { replaceId: 'r1', page: 1, userIds: ['a'], last: true }), 'invalid_request', /in order/);
    expect((await bob.api.get('/v1/call-policy')).json).toEqual(before);
  });

  it('the block list holds at most 1,000 users: an edit past it changes nothing', async () => {
    const bob = device(url);
    for (let i = 0; i < 1000; i += 1000) {
      const r = await backend().put(`/v1/server/users/${bob.userId}/call-policy`, { block: Array.from({ length: 1000 }, (_, n) => `u${i + n}`) });
      expect(r.status, r.text).toBe(200);
    }
    expectProblem(await bob.api.put('/v1/call-policy', { block: ['one-more'], mode: 'nobody' }), 'invalid_request', /at most 1000/);
    const p = (await bob.api.get('/v1/call-policy')).json;
    expect([p.mode, p.blockedUserIds.length]).toEqual(['everyone', 1000]);
  });

  it('the allow list is read page by page with a cursor; bad cursors and limits are 400', async () => {
    const bob = device(url);
    const ids = Array.from({ length: 2500 }, (_, i) => `friend-${i}`);
    for (let page = 0; page < 3; page++) {
      const r = await backend().put(`/v1/server/users/${bob.userId}/allow-list`, { replaceId: 'walk', page, userIds: ids.slice(page * 1000, page * 1000 + 1000), last: page === 2 });
      expect(r.status, r.text).toBe(200);
    }
    const seen = new Set<string>();
    let cursor: string | null = '0';
    let pages = 0;
    while (cursor !== null) {
      const r = await backend().get(`/v1/server/users/${bob.userId}/allow-list?cursor=${cursor}&limit=500`);
      expect(r.status, r.text).toBe(200);
      for (const id of r.json.userIds as string[]) seen.add(id);
      cursor = r.json.nextCursor;
      pages++;
    }
    expect([...seen].sort()).toEqual([...ids].sort());
    expect(pages).toBeGreaterThan(1);
    expectProblem(await backend().get(`/v1/server/users/${bob.userId}/allow-list?cursor=abc`), 'invalid_request', /cursor/);
    expectProblem(await backend().get(`/v1/server/users/${bob.userId}/allow-list?limit=5000`), 'invalid_request', /limit/);
    expectProblem(await bob.api.get(`/v1/server/users/${bob.userId}/allow-list`), 'forbidden', /device session token/);
    expect((await backend().get(`/v1/server/users/${uid('nobody')}/allow-list`)).json).toMatchObject({ userIds: [], nextCursor: null });
  });

  it('an allow-list replace is seen only at its last page, and every page is idempotent', async () => {
    const bob = device(url);
    const path = `/v1/server/users/${bob.userId}/allow-list`;
    const page = (replaceId: string, n: number, userIds: string[], last: boolean) => backend().put(path, { replaceId, page: n, userIds, last });
    expect((await page('r1', 0, ['a', 'b'], true)).json).toMatchObject({ state: 'committed', size: 2 });
    const first = Array.from({ length: 1000 }, (_, i) => `c${i}`);
    expect((await page('r2', 0, first, false)).json).toMatchObject({ state: 'gathering', size: 1000 });
    expect((await page('r2', 0, first, false)).json).toMatchObject({ state: 'gathering', size: 1000 });
    // Nothing of r2 is seen yet.
    expect((await bob.api.get('/v1/call-policy')).json.allowListSize).toBe(2);
    expect(await redis.sismember(keys.allowList(ks, bob.userId), 'c0')).toBe(0);
    expect((await page('r2', 1, ['d'], true)).json).toMatchObject({ state: 'committed', size: 1001 });
    expect((await page('r2', 1, ['d'], true)).json).toMatchObject({ state: 'committed', size: 1001 });
    expect((await page('r2', 0, first, false)).json).toMatchObject({ state: 'committed', size: 1001 });
    expect(await redis.sismember(keys.allowList(ks, bob.userId), 'a')).toBe(0);
    expect(await redis.sismember(keys.allowList(ks, bob.userId), 'd')).toBe(1);
    // An empty replace empties it.
    expect((await page('r3', 0, [], true)).json).toMatchObject({ state: 'committed', size: 0 });
    expect(await redis.exists(keys.allowList(ks, bob.userId))).toBe(0);
  });
});

describe('enforced by the create', () => {
  it('100 creates from a blocked caller: 0 invitations, 0 pushes, 0 events; each rings out for the caller', async () => {
    const callee = await reachableCallee();
    const caller = device(url);
    const cursor = await headCursor(callee.d);
    await backend().put(`/v1/server/users/${callee.userId}/call-policy`, { block: [caller.userId] });
    const calls = [];
    for (let i = 0; i < 100; i++) calls.push(await create(caller, callee.userId));
    const ids: string[] = calls.map((c) => c.callId);
    // The caller sees each ring out; by then the relay has handled every change.
    await waitUntil('every call rang out', async () => {
      const states = await Promise.all(ids.map(async (id) => (await caller.api.get(`/v1/calls/${id}`)).json));
      return states.every((s) => s.state === 'ended' && s.endReason === 'unanswered');
    }, 20_000);
    await pushesSettled(ps, ids);
    // A barrier: a call from someone else reaches the callee after anything of the blocked ones.
    const other = await create(device(url), callee.userId);
    await waitUntil('the barrier call', () => callee.socket.ws.events().some((e) => e.callId === other.callId));
    expect(callee.socket.ws.events().filter((e) => ids.includes(e.callId))).toEqual([]);
    const logged = await eventsUntil(callee.d, cursor, (e) => e.some((x) => x.callId === other.callId));
    expect(logged.filter((e) => ids.includes(e.callId))).toEqual([]);
    await pushesSettled(ps, [other.callId]);
    expect(pushesTo(callee.ios)).toBe(1);
    expect(pushesTo(callee.android)).toBe(1);
    // The callee's history says what happened; the caller's says it rang out.
    const history = (await backend().get(`/v1/server/users/${callee.userId}/calls?limit=200`)).json.calls as any[];
    const blocked = history.filter((r) => ids.includes(r.callId));
    expect(blocked).toHaveLength(100);
    expect(blocked.every((r) => r.screened === 'blocked' && r.missed === false && r.endReason === 'unanswered')).toBe(true);
    const mine = (await caller.api.get('/v1/calls?limit=200')).json.calls as any[];
    expect(mine.every((r) => r.screened === undefined && r.endReason === 'unanswered')).toBe(true);
  });

  it('a callee whose policy cannot be read: the create fails with a problem, and the server goes on serving', async () => {
    const caller = device(url);
    const broken = device(url);
    // Not a hash: reading the policy fails (WRONGTYPE), on a cluster before the create's script,
    // on a single Redis inside it. On a cluster that failure once also went unhandled in the
    // store and ended the server process (test/cluster/failover.test.ts met it as CLUSTERDOWN).
    await redis.set(keys.callPolicy(ks, broken.userId), 'not a policy');
    try {
      const res = await caller.api.post('/v1/calls', { callId: randomUUID(), calleeUserId: broken.userId, operationId: uid('op') });
      expect(res.status, res.text).toBeGreaterThanOrEqual(500);
      expect(res.headers.get('content-type'), res.text).toBe('application/problem+json');
      // Alive (a process that dies of it takes a moment to go): the next create, to someone else, rings.
      await sleep(200);
      const next = await caller.api.post('/v1/calls', { callId: randomUUID(), calleeUserId: device(url).userId, operationId: uid('op') });
      expect(next.status, next.text).toBe(201);
    } finally {
      await redis.del(keys.callPolicy(ks, broken.userId));
    }
  });

  it('what the caller sees of a blocked call is byte for byte what a real ring-out gives', async () => {
    // A real ring-out: a callee with no device online and none registered.
    const view = async (calleeUserId: string, caller: Device) => {
      const cursor = await headCursor(caller);
      const { callId, res } = await create(caller, calleeUserId);
      const events = await eventsUntil(caller, cursor, (e) => e.some((x) => x.callId === callId && x.type === 'call.ended'), 10_000);
      const ended = (await caller.api.get(`/v1/calls/${callId}`)).text;
      const history = (await caller.api.get('/v1/calls')).text;
      const norm = (s: string) =>
        s
          .replaceAll(callId, 'CALL')
          .replaceAll(calleeUserId, 'CALLEE')
          .replaceAll(caller.userId, 'CALLER')
          .replaceAll(caller.installationId, 'INST')
          .replace(/"(\w*At\w*Ms|\w*Ms|eventId|occurredAt\w*)":("[^"]*"|\d+)/g, '"$1":0');
      return { headers: [...res.headers.keys()].sort(), status: res.status, created: norm(res.text), events: norm(JSON.stringify(events)), ended: norm(ended), history: norm(history) };
    };
    const nobodyHome = await view(uid('offline'), device(url));
    const blocker = await reachableCallee();
    const caller = device(url);
    await blocker.d.api.put('/v1/call-policy', { block: [caller.userId] });
    expect(await view(blocker.userId, caller)).toEqual(nobodyHome);
  });

  it('contacts only: rings for callers on the allow list; nobody: rings for none; the block list wins', async () => {
    const callee = await reachableCallee();
    const friend = device(url);
    const stranger = device(url);
    await backend().put(`/v1/server/users/${callee.userId}/allow-list`, { replaceId: 'r1', page: 0, userIds: [friend.userId], last: true });
    await callee.d.api.put('/v1/call-policy', { mode: 'contacts' });
    const fromStranger = await create(stranger, callee.userId);
    const fromFriend = await create(friend, callee.userId);
    await waitUntil('the friend rings', () => callee.socket.ws.events().some((e) => e.callId === fromFriend.callId));
    expect(callee.socket.ws.events().some((e) => e.callId === fromStranger.callId)).toBe(false);
    await callee.d.api.put('/v1/call-policy', { mode: 'nobody' });
    const none = await create(friend, callee.userId);
    await callee.d.api.put('/v1/call-policy', { mode: 'everyone', block: [friend.userId] });
    const blocked = await create(friend, callee.userId);
    const barrier = await create(stranger, callee.userId);
    await waitUntil('the stranger rings under everyone', () => callee.socket.ws.events().some((e) => e.callId === barrier.callId));
    expect(callee.socket.ws.events().filter((e) => ([fromStranger.callId, none.callId, blocked.callId] as string[]).includes(e.callId))).toEqual([]);
    // Each is filed when it rings out for its caller, the three in any order with the others.
    const screenedCalls = [fromStranger.callId, none.callId, blocked.callId];
    let reasons: Record<string, unknown> = {};
    await waitUntil('the three filed', async () => {
      reasons = Object.fromEntries(((await backend().get(`/v1/server/users/${callee.userId}/calls`)).json.calls as any[]).map((r) => [r.callId, r.screened ?? null]));
      return screenedCalls.every((id) => id in reasons);
    }, 10_000);
    expect(screenedCalls.map((id) => reasons[id])).toEqual(['notAllowed', 'notAllowed', 'blocked']);
  });

  it('a block set while creates are in flight: each call either rang the callee or never does', async () => {
    const callee = await reachableCallee();
    const caller = device(url);
    const inFlight = Array.from({ length: 30 }, () => create(caller, callee.userId));
    const block = backend().put(`/v1/server/users/${callee.userId}/call-policy`, { block: [caller.userId] });
    const calls = await Promise.all(inFlight);
    await block;
    const after = await create(caller, callee.userId);
    const ids: string[] = [...calls.map((c) => c.callId), after.callId];
    await waitUntil('all ended', async () => (await Promise.all(ids.map(async (id) => (await caller.api.get(`/v1/calls/${id}`)).json.state))).every((s) => s === 'ended'), 20_000);
    await pushesSettled(ps, ids);
    const barrier = await create(device(url), callee.userId);
    await waitUntil('the barrier call', () => callee.socket.ws.events().some((e) => e.callId === barrier.callId));
    // The relay files each call's record at its end, shard by shard: wait for all of them.
    let history = new Map<string, any>();
    await waitUntil('every call filed', async () => {
      history = new Map(((await backend().get(`/v1/server/users/${callee.userId}/calls?limit=200`)).json.calls as any[]).map((r) => [r.callId, r]));
      return ids.every((id) => history.has(id));
    }, 10_000);
    for (const id of ids) {
      const told = callee.socket.ws.events().filter((e) => e.callId === id);
      const screened = history.get(id)?.screened;
      // Rang: invited and then told it ended. Never rang: nothing at all.
      if (screened) expect(told, id).toEqual([]);
      else expect(told.map((e) => e.type), id).toEqual(['call.invited', 'call.ended']);
    }
    expect(history.get(after.callId)?.screened).toBe('blocked');
  });

  it('a blocked caller does not use up the callee\'s invitations (RATE_INVITES_PER_CALLEE_PER_MIN) with calls or invites into a group call: others still ring', async () => {
    const limited = await ps.stack.addServer({ ROLES: 'api', SERVER_API_KEYS: server.hash, RING_TIMEOUT_MS: String(RING_MS), RATE_CALL_CREATES_PER_MIN: '0', RATE_INVITES_PER_CALLEE_PER_MIN: '3' });
    const callee = await reachableCallee();
    const spammer = device(limited.url);
    await callee.d.api.put('/v1/call-policy', { block: [spammer.userId] });
    for (let i = 0; i < 4; i++) await create(spammer, callee.userId);
    const groupId = randomUUID();
    const group = await spammer.api.post('/v1/calls', { callId: groupId, calleeUserIds: [callee.userId], operationId: uid('op') });
    expect(group.status, group.text).toBe(201);
    // Invited again and again into its group call: each invite is taken, none counts.
    for (let i = 0; i < 4; i++) {
      const invited = await spammer.api.post(`/v1/calls/${groupId}/invite`, { userIds: [callee.userId], operationId: uid('op') });
      expect(invited.status, invited.text).toBe(200);
    }
    // Three invitations a minute are left for everyone else: all three ring, a fourth is refused.
    const friends = [device(limited.url), device(limited.url), device(limited.url)];
    const rung: { callId: string }[] = [];
    for (const f of friends) rung.push(await create(f, callee.userId));
    await waitUntil('the friends ring', () => rung.every((r) => callee.socket.ws.events().some((e) => e.callId === r.callId)));
    expectProblem(await device(limited.url).api.post('/v1/calls', { callId: randomUUID(), calleeUserId: callee.userId, operationId: uid('op') }), 'rate_limited', /too many calls/);
  });

  it('SCREENED_CALL_REPLY=busy: the blocked caller hears busy at once, as a call to a busy user gives', async () => {
    busyReply ??= await ps.stack.addServer({ ROLES: 'api', SCREENED_CALL_REPLY: 'busy', SERVER_API_KEYS: server.hash, RING_TIMEOUT_MS: String(RING_MS), RATE_CALL_CREATES_PER_MIN: '0', RATE_INVITES_PER_CALLEE_PER_MIN: '0' });
    const callee = await reachableCallee();
    const caller = device(busyReply.url);
    await callee.d.api.put('/v1/call-policy', { block: [caller.userId] });
    const { res, callId } = await create(caller, callee.userId);
    expect(res.json).toMatchObject({ state: 'ended', endReason: 'busy' });
    const barrier = await create(device(url), callee.userId);
    await waitUntil('the barrier call', () => callee.socket.ws.events().some((e) => e.callId === barrier.callId));
    expect(callee.socket.ws.events().filter((e) => e.callId === callId)).toEqual([]);
  });
});

describe('do not disturb', () => {
  it('silence: nothing rings, the caller sees it ring out, the callee finds it missed (silenced); a favourite rings through; it ends by itself at untilMs', async () => {
    const callee = await reachableCallee();
    const caller = device(url);
    const favourite = device(url);
    const cursor = await headCursor(callee.d);
    const untilMs = Date.now() + 4_000;
    const set = await callee.d.api.put('/v1/call-policy', { doNotDisturb: { on: true, untilMs }, favourite: [favourite.userId] });
    expect(set.status, set.text).toBe(200);
    expect(set.json.doNotDisturb).toEqual({ on: true, untilMs, action: 'silence', favouriteUserIds: [favourite.userId] });
    const silenced = await create(caller, callee.userId);
    const through = await create(favourite, callee.userId);
    await waitUntil('the favourite rings', () => callee.socket.ws.events().some((e) => e.callId === through.callId));
    await waitUntil('the silenced call rang out for its caller', async () => (await caller.api.get(`/v1/calls/${silenced.callId}`)).json.endReason === 'unanswered', 10_000);
    await pushesSettled(ps, [silenced.callId, through.callId]);
    // Past untilMs a call from anyone rings again: the barrier after everything of the silenced one.
    await waitUntil('do not disturb over', async () => (await callee.d.api.get('/v1/call-policy')).json.doNotDisturb.on === false, 10_000, { intervalMs: 200 });
    const after = await create(caller, callee.userId);
    await waitUntil('a call after untilMs rings', () => callee.socket.ws.events().some((e) => e.callId === after.callId));
    // Of the silenced call, one event: a missed call once it rang out, live and in the log.
    expect(callee.socket.ws.events().filter((e) => e.callId === silenced.callId).map((e) => [e.type, e.userId, e.callerUserId])).toEqual([['call.missed', callee.userId, caller.userId]]);
    const logged = await eventsUntil(callee.d, cursor, (e) => e.some((x) => x.callId === after.callId));
    expect(logged.filter((e) => e.callId === silenced.callId).map((e) => e.type)).toEqual(['call.missed']);
    await pushesSettled(ps, [after.callId]);
    const pushed = (token: string) => [...ps.apns.requests.filter((r) => r.token === token).map((r) => JSON.stringify(r.body)), ...ps.fcm.messages.filter((m) => m.token === token).map((m) => JSON.stringify(m))];
    expect(pushed(callee.ios).filter((b) => b.includes(through.callId))).toHaveLength(1);
    expect(pushed(callee.ios).filter((b) => b.includes(silenced.callId))).toEqual([]);
    // Android gets the missed-call alert once the call rang out (docs/protocol.md "Missed-call alerts"), nothing that rings.
    await waitUntil('the missed-call alert', () => pushed(callee.android).some((b) => b.includes(silenced.callId)));
    expect(pushed(callee.android).filter((b) => b.includes(silenced.callId)).map((b) => b.includes('call.missed'))).toEqual([true]);
    let record: any;
    await waitUntil('the silenced call filed', async () => {
      record = ((await backend().get(`/v1/server/users/${callee.userId}/calls`)).json.calls as any[]).find((r) => r.callId === silenced.callId);
      return record !== undefined;
    }, 10_000);
    expect(record).toMatchObject({ screened: 'silenced', missed: true, endReason: 'unanswered' });
    const mine = ((await caller.api.get('/v1/calls')).json.calls as any[]).find((r) => r.callId === silenced.callId);
    expect(mine).toMatchObject({ endReason: 'unanswered' });
    expect(mine.screened).toBeUndefined();
  });

  it('reject: the caller hears busy at once; the callee\'s history says doNotDisturb, not missed; turned off, calls ring', async () => {
    const callee = await reachableCallee();
    const caller = device(url);
    await backend().put(`/v1/server/users/${callee.userId}/call-policy`, { doNotDisturb: { on: true, action: 'reject' } });
    const rejected = await create(caller, callee.userId);
    expect(rejected.res.json).toMatchObject({ state: 'ended', endReason: 'busy' });
    const off = await callee.d.api.put('/v1/call-policy', { doNotDisturb: { on: false } });
    expect(off.json.doNotDisturb).toEqual({ on: false, untilMs: null, action: 'reject', favouriteUserIds: [] });
    const rings = await create(caller, callee.userId);
    await waitUntil('a call rings once it is off', () => callee.socket.ws.events().some((e) => e.callId === rings.callId));
    expect(callee.socket.ws.events().filter((e) => e.callId === rejected.callId)).toEqual([]);
    let record: any;
    await waitUntil('the rejected call filed', async () => {
      record = ((await backend().get(`/v1/server/users/${callee.userId}/calls`)).json.calls as any[]).find((r) => r.callId === rejected.callId);
      return record !== undefined;
    }, 10_000);
    expect(record).toMatchObject({ screened: 'doNotDisturb', missed: false, endReason: 'busy' });
  });

  it('a group call: each invitee\'s own do not disturb, the others ring', async () => {
    const quiet = await reachableCallee();
    const other = await reachableCallee();
    const caller = device(url);
    await quiet.d.api.put('/v1/call-policy', { doNotDisturb: { on: true } });
    const callId = randomUUID();
    const res = await caller.api.post('/v1/calls', { callId, calleeUserIds: [quiet.userId, other.userId], operationId: uid('op') });
    expect(res.status, res.text).toBe(201);
    expect((res.json.participants as any[]).map((p) => p.state)).toEqual(['joined', 'invited', 'invited']);
    await waitUntil('the other invitee rings', () => other.socket.ws.events().some((e) => e.callId === callId));
    await waitUntil('both rang out', async () => (await caller.api.get(`/v1/calls/${callId}`)).json.state === 'ended', 10_000);
    // Nothing rang it; once it rang out, one missed call.
    await waitUntil('the missed call', () => quiet.socket.ws.events().some((e) => e.callId === callId));
    expect(quiet.socket.ws.events().filter((e) => e.callId === callId).map((e) => [e.type, e.userId])).toEqual([['call.missed', quiet.userId]]);
  });

  it('bad input is 400 and changes nothing: an end in the past, untilMs while turning it off, an unknown action, more than 100 favourites', async () => {
    const bob = device(url);
    await bob.api.put('/v1/call-policy', { doNotDisturb: { on: true, action: 'reject' }, favourite: ['mum'] });
    const before = (await bob.api.get('/v1/call-policy')).json;
    expectProblem(await bob.api.put('/v1/call-policy', { doNotDisturb: { on: true, untilMs: Date.now() - 1 } }), 'invalid_request', /untilMs/);
    expectProblem(await bob.api.put('/v1/call-policy', { doNotDisturb: { on: false, untilMs: Date.now() + 60_000 } }), 'invalid_request', /untilMs/);
    expectProblem(await bob.api.put('/v1/call-policy', { doNotDisturb: { on: true, action: 'vibrate' } }), 'invalid_request', /action/);
    expectProblem(await bob.api.put('/v1/call-policy', { favourite: Array.from({ length: 100 }, (_, i) => `f${i}`) }), 'invalid_request', /at most 100/);
    expect((await bob.api.get('/v1/call-policy')).json).toEqual(before);
  });
});

describe('group calls', () => {
  it('a call of four with one blocked invitee: the other three ring, the blocked one never, and looks to the caller as one ringing out', async () => {
    const caller = device(url);
    const invitees = await Promise.all([reachableCallee(), reachableCallee(), reachableCallee(), reachableCallee()]);
    const [blocker, ...others] = invitees as [Awaited<ReturnType<typeof reachableCallee>>, ...Awaited<ReturnType<typeof reachableCallee>>[]];
    await blocker.d.api.put('/v1/call-policy', { block: [caller.userId] });
    const callId = randomUUID();
    const res = await caller.api.post('/v1/calls', { callId, calleeUserIds: invitees.map((i) => i.userId), operationId: uid('op') });
    expect(res.status, res.text).toBe(201);
    // The caller sees every invitee alike.
    expect((res.json.participants as any[]).slice(1).map((p) => p.state)).toEqual(['invited', 'invited', 'invited', 'invited']);
    for (const o of others) await waitUntil('rung', () => o.socket.ws.events().some((e) => e.callId === callId && e.type === 'call.invited'));
    await pushesSettled(ps, [callId]);
    for (const o of others) expect(pushesTo(o.ios) + pushesTo(o.android)).toBeGreaterThanOrEqual(2);
    const barrier = await create(device(url), blocker.userId);
    await waitUntil('the barrier call', () => blocker.socket.ws.events().some((e) => e.callId === barrier.callId));
    expect(blocker.socket.ws.events().filter((e) => e.callId === callId)).toEqual([]);
    await pushesSettled(ps, [barrier.callId]);
    expect(pushesTo(blocker.ios) + pushesTo(blocker.android)).toBe(2);
    // Everyone rings out; the blocked member's own record says why.
    await caller.api.post(`/v1/calls/${callId}/end`, { operationId: uid('op'), reason: 'localHangup', forAll: true });
    await waitUntil('filed', async () => ((await backend().get(`/v1/server/users/${blocker.userId}/calls`)).json.calls as any[]).some((r) => r.callId === callId), 10_000);
    const record = ((await backend().get(`/v1/server/users/${blocker.userId}/calls`)).json.calls as any[]).find((r) => r.callId === callId);
    expect(record).toMatchObject({ screened: 'blocked', missed: false });
    const otherRecord = ((await backend().get(`/v1/server/users/${others[0]!.userId}/calls`)).json.calls as any[]).find((r) => r.callId === callId);
    expect(otherRecord.screened).toBeUndefined();
  });

  it('a late invite is checked against the invitee\'s policy at the time of the invite; contacts-only rings only for the list', async () => {
    const caller = device(url);
    const first = await reachableCallee();
    const contactsOnly = await reachableCallee();
    const friendOf = await reachableCallee();
    await contactsOnly.d.api.put('/v1/call-policy', { mode: 'contacts' });
    await backend().put(`/v1/server/users/${friendOf.userId}/allow-list`, { replaceId: 'r1', page: 0, userIds: [caller.userId], last: true });
    await friendOf.d.api.put('/v1/call-policy', { mode: 'contacts' });
    const callId = randomUUID();
    const created = await caller.api.post('/v1/calls', { callId, calleeUserIds: [first.userId], operationId: uid('op') });
    expect(created.status, created.text).toBe(201);
    const invited = await caller.api.post(`/v1/calls/${callId}/invite`, { operationId: uid('op'), userIds: [contactsOnly.userId, friendOf.userId] });
    expect(invited.status, invited.text).toBe(200);
    await waitUntil('the friend rings', () => friendOf.socket.ws.events().some((e) => e.callId === callId && e.type === 'call.invited'));
    // A barrier: once anyone may call, a new call reaches the user after anything of the invite.
    await contactsOnly.d.api.put('/v1/call-policy', { mode: 'everyone' });
    const barrier = await create(device(url), contactsOnly.userId);
    await waitUntil('the barrier call', () => contactsOnly.socket.ws.events().some((e) => e.callId === barrier.callId));
    await caller.api.post(`/v1/calls/${callId}/end`, { operationId: uid('op'), reason: 'localHangup', forAll: true });
    await waitUntil('filed', async () => ((await backend().get(`/v1/server/users/${contactsOnly.userId}/calls`)).json.calls as any[]).some((r) => r.callId === callId), 10_000);
    expect(contactsOnly.socket.ws.events().filter((e) => e.callId === callId)).toEqual([]);
    expect(((await backend().get(`/v1/server/users/${contactsOnly.userId}/calls`)).json.calls as any[]).find((r) => r.callId === callId)).toMatchObject({ screened: 'notAllowed' });
  });
});

describe('races', () => {
  it('a policy change and invites at once: each invited user either rang or never does, never half', async () => {
    const caller = device(url);
    const first = await reachableCallee();
    const callId = randomUUID();
    expect((await caller.api.post('/v1/calls', { callId, calleeUserIds: [first.userId], operationId: uid('op') })).status).toBe(201);
    const targets = await Promise.all(Array.from({ length: 6 }, () => reachableCallee()));
    // Each target turns to `nobody` while the caller invites it.
    await Promise.all(
      targets.map((t) => Promise.all([caller.api.post(`/v1/calls/${callId}/invite`, { operationId: uid('op'), userIds: [t.userId] }), t.d.api.put('/v1/call-policy', { mode: 'nobody' })])),
    );
    await caller.api.post(`/v1/calls/${callId}/end`, { operationId: uid('op'), reason: 'localHangup', forAll: true });
    await pushesSettled(ps, [callId]);
    for (const t of targets) {
      await waitUntil('filed', async () => ((await backend().get(`/v1/server/users/${t.userId}/calls`)).json.calls as any[]).some((r) => r.callId === callId), 10_000);
      const record = ((await backend().get(`/v1/server/users/${t.userId}/calls`)).json.calls as any[]).find((r) => r.callId === callId);
      // A barrier: once anyone may call again, a new call reaches the user after anything of the invite.
      await t.d.api.put('/v1/call-policy', { mode: 'everyone' });
      const barrier = await create(device(url), t.userId);
      await waitUntil('the barrier call', () => t.socket.ws.events().some((e) => e.callId === barrier.callId));
      const told = t.socket.ws.events().filter((e) => e.callId === callId).map((e) => e.type);
      if (record.screened) {
        expect(record.screened).toBe('notAllowed');
        expect(told).toEqual([]);
        await pushesSettled(ps, [barrier.callId]);
        expect(pushesTo(t.ios) + pushesTo(t.android)).toBe(2); // the barrier's only
      } else {
        expect(told).toEqual(['call.invited', 'call.ended']);
      }
    }
  });
});

describe('erase', () => {
  it('removes every policy key with the user (SCAN)', async () => {
    const bob = device(url);
    await bob.api.put('/v1/call-policy', { mode: 'contacts', block: ['x'] });
    await backend().put(`/v1/server/users/${bob.userId}/allow-list`, { replaceId: 'r1', page: 0, userIds: ['a'], last: true });
    await backend().put(`/v1/server/users/${bob.userId}/allow-list`, { replaceId: 'r2', page: 0, userIds: ['b'], last: false });
    // Every primary's keys (a cluster's too).
    const nodes: Redis[] = ON_CLUSTER ? (redis as unknown as Cluster).nodes('master') : [redis];
    const scan = async () => {
      const found: string[] = [];
      for (const node of nodes) {
        let cursor = '0';
        do {
          const [next, batch] = await node.scan(cursor, 'MATCH', `*{u:${bob.userId}}*`, 'COUNT', 1000);
          found.push(...batch);
          cursor = next;
        } while (cursor !== '0');
      }
      return found.sort();
    };
    expect(await scan()).toEqual(expect.arrayContaining([keys.callPolicy(ks, bob.userId), keys.allowList(ks, bob.userId), keys.allowListNext(ks, bob.userId)]));
    expect((await backend().del(`/v1/server/users/${bob.userId}`)).status).toBe(200);
    expect(await scan()).toEqual([]);
  });
});
