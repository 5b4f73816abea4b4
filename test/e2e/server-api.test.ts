import { describe, expect, it } from 'vitest';
import type { Cluster, Redis } from 'ioredis';
import { stackForFile } from '../support/stack.js';
import { acceptedCall, device, end, eventsUntil, expectProblem, headCursor, relayDone, ringingCall, uid } from '../support/fixtures.js';
import { api } from '../support/http.js';
import { hmacJwt, claims, TEST_JWT_SECRET } from '../support/tokens.js';
import { upgradeStatus, UpgradeRejected } from '../support/ws-client.js';
import { Sockets, online, user, waitUntil } from './helpers.js';
import { newServerKey } from '../../src/auth/serverKeys.js';
import { keys } from '../../src/redis/keys.js';
import { iosToken } from './push-helpers.js';

/**
 * The server API (docs/server-api.md): its authentication, ending any call, a user's active calls
 * and history, signing an installation out, and erasing a user.
 */

const server = newServerKey();
const ks = { prefix: 'cb', shards: 8 };
let url: string;
let redis: Redis;
stackForFile({ SERVER_API_KEYS: `${newServerKey().hash},${server.hash}` }, (s) => {
  url = s.url;
  redis = s.redis;
});
const sockets = Sockets.closedAfterEachTest();
const backend = () => api(url, server.key);

describe('authentication', () => {
  it('refuses no credential, a wrong key and an expired token with 401, and a device token with 403', async () => {
    const path = `/v1/server/users/${uid('u')}/calls`;
    expectProblem(await api(url).get(path), 'unauthorized', /missing Authorization/);
    expectProblem(await api(url, newServerKey().key).get(path), 'unauthorized', /not a server API key/);
    expectProblem(await api(url, 'garbage').get(path), 'unauthorized', /not a server API key/);
    const expired = hmacJwt('HS256', TEST_JWT_SECRET, claims({ userId: 'alice', installationId: 'alice-phone' }, -60));
    expectProblem(await api(url, expired).get(path), 'unauthorized', /expired/);
    expectProblem(await device(url).api.get(path), 'forbidden', /device session token/);
    expect((await backend().get(path)).status).toBe(200);
  });

  it('refuses the server key on device routes and on the signaling socket (403)', async () => {
    const asDevice = backend();
    expectProblem(await asDevice.get('/v1/calls'), 'forbidden', /server API key/);
    expectProblem(await asDevice.post('/v1/calls', { callId: uid('c'), calleeUserId: 'bob', operationId: uid('op') }), 'forbidden', /server API key/);
    expectProblem(await asDevice.get('/v1/call-events'), 'forbidden', /server API key/);
    const ws = await upgradeStatus(url, server.key);
    expect(ws).toBeInstanceOf(UpgradeRejected);
    expect((ws as UpgradeRejected).status).toBe(403);
  });
});

describe('calls', () => {
  it('ends a ringing call: every device of both sides is told, and a retry changes nothing', async () => {
    const { callId, caller, callee } = await ringingCall(url);
    const [callerCursor, calleeCursor] = [await headCursor(caller), await headCursor(callee)];
    const res = await backend().post(`/v1/server/calls/${callId}/end`, { reason: 'failed' });
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ ended: true, call: { callId, state: 'ended', endReason: 'failed', endedBy: 'system' } });
    for (const [d, cursor] of [[caller, callerCursor], [callee, calleeCursor]] as const) {
      const events = await eventsUntil(d, cursor, (e) => e.some((x) => x.type === 'call.ended'));
      expect(events.find((x) => x.type === 'call.ended')).toMatchObject({ callId, reason: 'failed' });
    }
    const again = await backend().post(`/v1/server/calls/${callId}/end`);
    expect(again.json).toEqual({ ended: false, call: res.json.call });
    expect((await backend().get(`/v1/server/calls/${callId}`)).json).toEqual(res.json.call);
  });

  it('ends an accepted call with remoteEnded by default', async () => {
    const { callId, callee } = await acceptedCall(url);
    const res = await backend().post(`/v1/server/calls/${callId}/end`);
    expect(res.json.call).toMatchObject({ state: 'ended', endReason: 'remoteEnded', endedBy: 'system' });
    expect((await callee.api.get(`/v1/calls/${callId}`)).json.endReason).toBe('remoteEnded');
  });

  it('an unknown call is 404, a bad reason or callId 400', async () => {
    expectProblem(await backend().post(`/v1/server/calls/${uid('c')}/end`), 'not_found', /no call/);
    const { callId } = await ringingCall(url);
    expectProblem(await backend().post(`/v1/server/calls/${callId}/end`, { reason: 'declined' }), 'invalid_request', /reason/);
    expectProblem(await backend().post('/v1/server/calls/bad%20id/end'), 'invalid_request', /id/);
    expectProblem(await backend().get(`/v1/server/calls/${uid('c')}`), 'not_found', /no call/);
  });

  it("lists a user's active calls, ringing and accepted, and their history", async () => {
    const alice = device(url);
    const ringing = await ringingCall(url, alice);
    const accepted = await acceptedCall(url, alice);
    const done = await ringingCall(url, alice);
    await end(alice, done.callId, 'localHangup');
    await relayDone(redis, ks, [ringing.callId, accepted.callId, done.callId]);
    const active = await backend().get(`/v1/server/users/${encodeURIComponent(alice.userId)}/calls/active`);
    expect(active.status).toBe(200);
    expect(active.json.calls.map((c: any) => [c.callId, c.state]).sort()).toEqual(
      [[ringing.callId, 'ringing'], [accepted.callId, 'accepted']].sort(),
    );
    const history = await backend().get(`/v1/server/users/${encodeURIComponent(alice.userId)}/calls`);
    expect(history.json.calls.map((c: any) => c.callId)).toEqual([done.callId]);
    expect(history.text).toBe((await alice.api.get('/v1/calls')).text);
    expectProblem(await backend().get('/v1/server/users/a%7Bb/calls'), 'invalid_request', /userId/);
  });
});

describe('users', () => {
  it('signs one installation out: its push tokens go, its sockets close with 4010, the others stay', async () => {
    const [phone, tablet] = user(url, 2);
    for (const d of [phone!, tablet!]) {
      const put = await d.api.put(`/v1/installations/${encodeURIComponent(d.installationId)}/push-tokens/iosVoip`, { token: iosToken(), appId: 'com.example.calls', iosEnvironment: 'production' });
      expect(put.status, put.text).toBe(200);
    }
    const [p, t] = sockets.add(await online([phone!, tablet!], url));
    const res = await backend().post(`/v1/server/users/${encodeURIComponent(phone!.userId)}/installations/${encodeURIComponent(phone!.installationId)}/sign-out`);
    expect(res.json).toEqual({ installationId: phone!.installationId, pushTokensRemoved: 1 });
    expect((await p!.ws.closed).code).toBe(4010);
    const fields = await redis.hkeys(keys.pushRegistrations(ks, phone!.userId));
    expect(fields).toEqual([`${tablet!.installationId}\niosVoip`]);
    // The tablet's socket still works.
    await t!.ws.send({ type: 'ping' });
    await t!.ws.next('pong');
    // Signing out again is harmless.
    expect((await backend().post(`/v1/server/users/${encodeURIComponent(phone!.userId)}/installations/${encodeURIComponent(phone!.installationId)}/sign-out`)).json.pushTokensRemoved).toBe(0);
  });

  it('erases a user: calls in progress end first, no key of the user is left, and the peers keep their history', async () => {
    const alice = device(url);
    const bob = device(url);
    const carol = device(url);
    await alice.api.put(`/v1/installations/${encodeURIComponent(alice.installationId)}/push-tokens/iosVoip`, { token: iosToken(), appId: 'com.example.calls', iosEnvironment: 'production' });
    // A finished call with messages, one in progress with bob, one ringing from carol.
    const old = await acceptedCall(url, alice, bob);
    const msg = await alice.api.post(`/v1/calls/${old.callId}/messages`, { operationId: uid('m'), payload: { kind: 'offer', sdp: 'v=0' } });
    expect(msg.status, msg.text).toBe(200);
    await end(bob, old.callId, 'localHangup');
    // (Ringing first: once alice is in a call, carol's would end at once as busy.)
    const ringing = await ringingCall(url, carol, alice);
    const live = await acceptedCall(url, alice, bob);
    await relayDone(redis, ks, [old.callId, live.callId, ringing.callId]);
    const [aliceWs] = sockets.add(await online([alice], url));
    const [bobCursor, carolCursor] = [await headCursor(bob), await headCursor(carol)];

    const res = await backend().del(`/v1/server/users/${encodeURIComponent(alice.userId)}`);
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ userId: alice.userId, callsEnded: 2 });
    expect(res.json.keysDeleted).toBeGreaterThan(5);
    expect((await aliceWs!.ws.closed).code).toBe(4010);
    // Bob was told his call ended.
    const events = await eventsUntil(bob, bobCursor, (e) => e.some((x) => x.type === 'call.ended' && x.callId === live.callId));
    expect(events.find((x) => x.callId === live.callId)).toMatchObject({ reason: 'remoteEnded' });
    // And carol, whose call to her was still ringing (docs/api.md "Who receives what").
    const carolEvents = await eventsUntil(carol, carolCursor, (e) => e.some((x) => x.type === 'call.ended' && x.callId === ringing.callId));
    expect(carolEvents.find((x) => x.callId === ringing.callId)).toMatchObject({ type: 'call.ended', reason: 'remoteEnded' });
    await relayDone(redis, ks, [live.callId, ringing.callId]);

    // The whole keyspace: no key names alice, and only the peers' own keys (their logs, histories
    // and idempotency records) mention her. Outbox entries go once relayed and trimmed (a second).
    const peers = [bob.userId, carol.userId];
    let leftovers: string[] = [];
    await waitUntil('no key of alice left', async () => {
      leftovers = [];
      // Every primary on a cluster.
      const nodes = (redis as unknown as { isCluster?: boolean }).isCluster ? (redis as unknown as Cluster).nodes('master') : [redis];
      for (const node of nodes) {
        let cursor = '0';
        do {
          const [next, batch] = await node.scan(cursor, 'COUNT', 1000);
          cursor = next;
          for (const k of batch) {
            if (k.includes(alice.userId)) leftovers.push(`name: ${k}`);
            else if (!peers.some((p) => k.includes(p)) && (await dump(node, k)).includes(alice.userId)) leftovers.push(`value: ${k}`);
          }
        } while (cursor !== '0');
      }
      return leftovers.length === 0;
    }).catch(() => {});
    expect(leftovers).toEqual([]);
    // The peers keep their history of the calls with her.
    const bobHistory = (await bob.api.get('/v1/calls')).json.calls.map((c: any) => c.callId);
    expect(bobHistory).toEqual(expect.arrayContaining([old.callId, live.callId]));
    expect((await carol.api.get('/v1/calls')).json.calls.map((c: any) => c.callId)).toEqual([ringing.callId]);
    // Erasing again finds nothing.
    expect((await backend().del(`/v1/server/users/${encodeURIComponent(alice.userId)}`)).json).toEqual({ userId: alice.userId, callsEnded: 0, keysDeleted: 0 });
  });
});

/** A key's value as text, whatever its type. */
async function dump(redis: Redis, key: string): Promise<string> {
  const type = await redis.type(key);
  if (type === 'string') return (await redis.get(key)) ?? '';
  if (type === 'hash') return JSON.stringify(await redis.hgetall(key));
  if (type === 'zset') return JSON.stringify(await redis.zrange(key, 0, -1));
  if (type === 'set') return JSON.stringify(await redis.smembers(key));
  if (type === 'list') return JSON.stringify(await redis.lrange(key, 0, -1));
  if (type === 'stream') return JSON.stringify(await redis.xrange(key, '-', '+'));
  return '';
}

