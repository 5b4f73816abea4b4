import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { answer, DEFAULT_CALL_SHARDS, device, end, getCall, relayDone, uid, type Device } from '../support/fixtures.js';
import { stackForFile, type Stack } from '../support/stack.js';
import { waitUntil } from '../support/wait.js';
import { connect } from '../support/ws-client.js';
import { keys as keyNames, LONG_LIVED_KEYS } from '../../src/redis/keys.js';
import { DAY_MS } from '../../src/calls/retention.js';

/**
 * Every key the backend writes has an end (docs/keyspace.md): after calls of every ending, with
 * in-call messages, renames and push registrations, each key either has a TTL or matches one of
 * the documented long-lived patterns (LONG_LIVED_KEYS); and with short retentions, a few hundred
 * lifecycles leave nothing behind once they are over but keys of those patterns. Prints MEMORY
 * USAGE by key kind, the figures in docs/keyspace.md.
 */

async function allKeys(redis: Redis): Promise<string[]> {
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'COUNT', 1000);
    cursor = next;
    out.push(...batch);
  } while (cursor !== '0');
  return out;
}

const longLived = (key: string) => LONG_LIVED_KEYS.some((k) => k.pattern.test(key));

/** A key's kind for the memory table: its name with IDs, user IDs and hashes generalised. */
const kindOf = (key: string) =>
  key
    .replace(/\{u:[^}]*\}/, '{u:*}')
    .replace(/\{c\d+\}/, '{cN}')
    .replace(/:[0-9a-f-]{36}/g, ':<id>')
    .replace(/:\d+:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+$/, ':<user>:<op>')
    .replace(/:(tok:[A-Za-z]+):.*/, ':$1:<hash>')
    .replace(/:(opb|rl:push|rl:msg|rang|endseen):.*/, ':$1:*');

/**
 * A group call (docs/group-calls.md) through every member transition: created to the callee and
 * two more, a receipt, a join, a decline, a late invite, a leave; it ends when the caller is left
 * alone (the late invitee still ringing then misses it). Its keys live under the call's hash tag
 * and in each member's own keys (history, busy markers).
 */
async function groupCallOfEveryTransition(caller: Device, callee: Device, url: string): Promise<{ callId: string; members: string[] }> {
  const [decliner, late, ringing] = [device(url, uid('decliner')), uid('late'), uid('ringing')];
  const callId = randomUUID();
  const ok = (res: { status: number; text: string }, status = 200) => expect(res.status, res.text).toBe(status);
  ok(await caller.api.post('/v1/calls', { callId, calleeUserIds: [callee.userId, decliner.userId, ringing], title: 'Group', operationId: uid('op') }), 201);
  ok(await callee.api.post(`/v1/calls/${callId}/ringing`, { operationId: uid('op'), via: 'fcm' }));
  ok(await answer(callee, callId));
  ok(await end(decliner, callId, 'declined'));
  ok(await caller.api.post(`/v1/calls/${callId}/invite`, { operationId: uid('op'), userIds: [late] }));
  const left = await end(callee, callId, 'localHangup');
  ok(left);
  expect(left.json.state, left.text).toBe('ended');
  return { callId, members: [caller.userId, callee.userId, decliner.userId, ringing, late] };
}

describe('keyspace bounds', () => {
  let stack: Stack;
  stackForFile({ ROLES: 'api,gateway,worker' }, (s) => (stack = s));

  it('after calls of every ending, every key has a TTL or is a documented long-lived key', async () => {
    const callee = uid('callee');
    const calleePhone = device(stack.url, callee);
    const reg = await calleePhone.api.put(`/v1/installations/${calleePhone.installationId}/push-tokens/androidPush`, {
      token: `fcm-${uid('t')}:APA91bxxxxxxxxxxxxxxxxxxxxxxxxxx`,
      appId: 'com.example.app',
    });
    expect(reg.status, reg.text).toBe(200);
    const caller = device(stack.url, uid('caller'));
    const ends = ['answered', 'declined', 'cancelled'] as const;
    for (const how of ends) {
      const callId = crypto.randomUUID();
      const created = await caller.api.post('/v1/calls', { callId, calleeUserId: callee, operationId: uid('op') });
      expect(created.status, created.text).toBe(201);
      const renamed = await caller.api.post(`/v1/calls/${callId}/rename`, { operationId: uid('op'), displayName: 'Renamed' });
      expect(renamed.status, renamed.text).toBe(200);
      if (how === 'answered') {
        expect((await answer(calleePhone, callId)).status).toBe(200);
        const msg = await caller.api.post(`/v1/calls/${callId}/messages`, { operationId: uid('op'), payload: { hello: 'world' } });
        expect(msg.status, msg.text).toBeLessThan(300);
        expect((await end(caller, callId, 'localHangup')).status).toBe(200);
      } else if (how === 'declined') {
        expect((await end(calleePhone, callId, 'declined')).status).toBe(200);
      } else {
        // The callee's phone rings with its socket open: its receipt and the end on its socket
        // mark its missed-call alert (src/push/missedCallSeen.ts).
        const ws = await connect(stack.url, calleePhone.token, { name: 'callee' });
        expect((await calleePhone.api.post(`/v1/calls/${callId}/ringing`, { operationId: uid('op'), via: 'socket' })).status).toBe(200);
        // The caller hanging up while it rings cancels it (`callerCancelled` is only what the callee is told).
        expect((await end(caller, callId, 'localHangup')).status).toBe(200);
        await ws.until(() => ws.events().some((e) => e.callId === callId && e.type === 'call.ended'), 5000, 'the end');
        const ks = { prefix: 'cb', shards: DEFAULT_CALL_SHARDS };
        await waitUntil('the end marked seen', async () => (await stack.redis.exists(keyNames.missedCallEndSeen(ks, callee, callId, calleePhone.installationId))) === 1);
        expect(await stack.redis.exists(keyNames.missedCallRang(ks, callee, callId, calleePhone.installationId))).toBe(1);
        ws.ws.close();
        await ws.closed;
      }
    }

    const group = await groupCallOfEveryTransition(caller, calleePhone, stack.url);
    // The relay writes each member's history and busy markers: wait for it, so they are checked too.
    await relayDone(stack.redis, { prefix: 'cb', shards: DEFAULT_CALL_SHARDS }, [group.callId]);
    for (const u of group.members) expect(await stack.redis.exists(keyNames.userHistoryIndex({ prefix: 'cb', shards: DEFAULT_CALL_SHARDS }, u)), `${u}'s history`).toBe(1);

    const keys = await allKeys(stack.redis);
    expect(keys.length).toBeGreaterThan(0);
    const unbounded: string[] = [];
    const memory = new Map<string, { n: number; bytes: number }>();
    for (const key of keys) {
      const ttl = await stack.redis.pttl(key);
      if (ttl === -1 && !longLived(key)) unbounded.push(key);
      const bytes = Number(await stack.redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
      const kind = kindOf(key);
      const m = memory.get(kind) ?? { n: 0, bytes: 0 };
      memory.set(kind, { n: m.n + 1, bytes: m.bytes + bytes });
    }
    // The figures docs/keyspace.md quotes (bytes per key of each kind, after these three calls).
    console.log([...memory].sort().map(([k, m]) => `${k}\t${m.n}\t${Math.round(m.bytes / m.n)}`).join('\n'));
    expect(unbounded).toEqual([]);
  });
});

/**
 * Retentions cut to seconds, or to their minimum where that is longer: the event log's metadata
 * (7 × EVENT_LOG_MAX_AGE_MS, at least 70 s) is the last to go, then the calls
 * (CALL_RETENTION_MS, at least 60 s from their end). The rate limits stay off, as in every test
 * server (test/support/server.ts): their counters expire with their fixed windows (up to an hour),
 * which the first test checks, and they would refuse this test's few hundred calls.
 */
const SHORT = {
  ROLES: 'api,gateway,worker',
  RING_TIMEOUT_MS: '1000',
  CALL_RETENTION_MS: '60000',
  IDEMPOTENCY_TTL_MS: '3000',
  CALL_RECORD_RETENTION_DAYS: String(20_000 / DAY_MS),
  EVENT_LOG_MAX_AGE_MS: '10000',
  PUSH_REGISTRATION_IDLE_DAYS: String(20_000 / DAY_MS),
};
/** The longest of those (the event log's metadata), and some slack for a loaded machine. */
const LONGEST_MS = 7 * Number(SHORT.EVENT_LOG_MAX_AGE_MS);
const LIFECYCLES = 240;
const PAIRS = 16;
const ENDINGS = ['answered', 'declined', 'rungOut', 'cancelled', 'group', 'groupRungOut'] as const;

describe('keyspace after short retention', () => {
  let stack: Stack;
  /**
   * The calls to be answered, declined or cancelled are created through a second api server
   * with the longest ring (45 s): within a 1 s ring a loaded machine sometimes let them ring out
   * first (the answer then got 409). Only the calls meant to ring out ring for 1 s.
   */
  let longRingUrl: string;
  stackForFile(SHORT, async (s) => {
    stack = s;
    longRingUrl = (await s.addServer({ ...SHORT, ROLES: 'api', RING_TIMEOUT_MS: '45000' })).url;
  });

  /** One call between a pair, ended the `i`th way; every third is renamed, every other answered one carries messages. */
  async function lifecycle(caller: Device, callee: Device, i: number): Promise<void> {
    const how = ENDINGS[i % ENDINGS.length]!;
    if (how === 'group' || how === 'groupRungOut') return groupLifecycle(caller, callee, how === 'groupRungOut');
    const callId = randomUUID();
    const creator = device(how === 'rungOut' ? stack.url : longRingUrl, caller.userId, caller.installationId);
    const created = await creator.api.post('/v1/calls', { callId, calleeUserId: callee.userId, operationId: uid('op') });
    expect(created.status, created.text).toBe(201);
    if (i % 3 === 0) {
      const renamed = await caller.api.post(`/v1/calls/${callId}/rename`, { operationId: uid('op'), displayName: `Renamed ${i}` });
      expect(renamed.status, renamed.text).toBe(200);
    }
    if (how === 'answered') {
      expect((await answer(callee, callId)).status).toBe(200);
      if (i % 8 === 0) {
        for (const [from, n] of [[caller, 3], [callee, 2]] as const) {
          for (let m = 0; m < n; m++) {
            const msg = await from.api.post(`/v1/calls/${callId}/messages`, { operationId: uid('op'), payload: { n: m } });
            expect(msg.status, msg.text).toBeLessThan(300);
          }
        }
      }
      expect((await end(callee, callId, 'localHangup')).status).toBe(200);
    } else if (how === 'declined') {
      expect((await end(callee, callId, 'declined')).status).toBe(200);
    } else if (how === 'cancelled') {
      // The caller hanging up while it rings cancels it (`callerCancelled` is only what the callee is told).
      const cancelled = await end(caller, callId, 'localHangup');
      expect([cancelled.status, cancelled.json?.state], cancelled.text).toEqual([200, 'ended']);
    } else {
      await waitUntil('the ring timeout to end the call', async () => (await getCall(caller, callId)).json?.state === 'ended', 10_000);
    }
  }

  /**
   * A group call between the pair and a third user: through the 45 s server, joined, rung into
   * late and left (it ends when the caller is alone); or through the 1 s server, rung out.
   */
  async function groupLifecycle(caller: Device, callee: Device, rungOut: boolean): Promise<void> {
    const callId = randomUUID();
    const creator = device(rungOut ? stack.url : longRingUrl, caller.userId, caller.installationId);
    const created = await creator.api.post('/v1/calls', { callId, calleeUserIds: [callee.userId, uid('third')], operationId: uid('op') });
    expect(created.status, created.text).toBe(201);
    if (rungOut) {
      await waitUntil('the ring sweep to ring every member out', async () => (await getCall(caller, callId)).json?.state === 'ended', 10_000);
      return;
    }
    expect((await answer(callee, callId)).status).toBe(200);
    const invited = await caller.api.post(`/v1/calls/${callId}/invite`, { operationId: uid('op'), userIds: [uid('late')] });
    expect(invited.status, invited.text).toBe(200);
    const left = await end(callee, callId, 'localHangup');
    expect([left.status, left.json?.state], left.text).toEqual([200, 'ended']);
  }

  it('a few hundred lifecycles of every ending leave, once the longest retention is over, the keyspace of before plus long-lived keys', async () => {
    const warning = () => stack.servers[0]!.logs().includes('IDEMPOTENCY_TTL_MS is below 24 h');
    expect(warning(), 'the start warning for a short IDEMPOTENCY_TTL_MS').toBe(true);
    const baseline = new Set(await allKeys(stack.redis));
    const added = async () => (await allKeys(stack.redis)).filter((k) => !baseline.has(k) && !longLived(k));

    const pairs = Array.from({ length: PAIRS }, () => ({ caller: device(stack.url, uid('caller')), callee: device(stack.url, uid('callee')) }));
    // Half the callees have a phone registered for push (no provider is configured: nothing is sent).
    for (const { callee } of pairs.filter((_, p) => p % 2 === 0)) {
      const reg = await callee.api.put(`/v1/installations/${callee.installationId}/push-tokens/androidPush`, {
        token: `fcm-${uid('t')}:APA91bxxxxxxxxxxxxxxxxxxxxxxxxxx`,
        appId: 'com.example.app',
      });
      expect(reg.status, reg.text).toBe(200);
    }
    // The registrations' keys, checked now: they go PUSH_REGISTRATION_IDLE_DAYS (20 s) after their
    // last use, and on a loaded machine the lifecycles below take longer than that.
    const registered = await added();
    for (const kind of [':push', ':tok:']) expect(registered.some((k) => k.includes(kind)), `a key with ${kind} after the registrations`).toBe(true);
    let next = 0;
    await Promise.all(
      pairs.map(async ({ caller, callee }) => {
        for (let i = next++; i < LIFECYCLES; i = next++) await lifecycle(caller, callee, i);
      }),
    );
    // The lifecycles wrote keys of every per-call and per-user kind (so the wait below can fail).
    // Not a count: on a loaded machine the first lifecycles' shortest-lived keys are gone by now.
    const written = await added();
    for (const kind of [':call:', ':history', ':op:', ':opb:', ':msgs:', ':msgseq:', ':log', ':logmeta', ':calls:history', ':calls:missed']) {
      expect(written.some((k) => k.includes(kind)), `a key with ${kind} after the lifecycles`).toBe(true);
    }

    let left: string[] = written;
    try {
      await waitUntil('the keyspace back to its baseline', async () => (left = await added()).length === 0, LONGEST_MS + 30_000);
    } catch {
      // What stayed, by name: each is a key without an end (docs/keyspace.md).
      expect(left.sort(), `keys left ${LONGEST_MS + 30_000} ms after the last lifecycle`).toEqual([]);
    }
  }, 300_000);
});
