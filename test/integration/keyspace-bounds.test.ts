import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answer, device, end, uid } from '../support/fixtures.js';
import { startStack, type Stack } from '../support/stack.js';
import { LONG_LIVED_KEYS } from '../../src/redis/keys.js';

/**
 * Every key the backend writes has an end (docs/keyspace.md): after calls of every ending, with
 * in-call messages, renames and push registrations, each key either has a TTL or matches one of
 * the documented long-lived patterns (LONG_LIVED_KEYS). Prints MEMORY USAGE by key kind, the
 * figures in docs/keyspace.md.
 */

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ ROLES: 'api,gateway,worker' });
});
afterAll(async () => {
  await stack?.stop();
});

async function allKeys(): Promise<string[]> {
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await stack.redis.scan(cursor, 'COUNT', 1000);
    cursor = next;
    out.push(...batch);
  } while (cursor !== '0');
  return out;
}

/** A key's kind for the memory table: its name with IDs, user IDs and hashes generalised. */
const kindOf = (key: string) =>
  key
    .replace(/\{u:[^}]*\}/, '{u:*}')
    .replace(/\{c\d+\}/, '{cN}')
    .replace(/:[0-9a-f-]{36}/g, ':<id>')
    .replace(/:\d+:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+$/, ':<user>:<op>')
    .replace(/:(tok:[A-Za-z]+):.*/, ':$1:<hash>')
    .replace(/:(opb|rl:push|rl:msg):.*/, ':$1:*');

describe('keyspace bounds', () => {
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
        expect((await end(caller, callId, 'callerCancelled')).status).toBe(200);
      }
    }

    const keys = await allKeys();
    expect(keys.length).toBeGreaterThan(0);
    const unbounded: string[] = [];
    const memory = new Map<string, { n: number; bytes: number }>();
    for (const key of keys) {
      const ttl = await stack.redis.pttl(key);
      if (ttl === -1 && !LONG_LIVED_KEYS.some((k) => k.pattern.test(key))) unbounded.push(key);
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
