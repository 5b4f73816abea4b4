import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_REDIS_COMMAND_TIMEOUT_MS } from '../support/server.js';
import { connectRedis, type RedisClient } from '../../src/redis/connection.js';
import { loadScripts } from '../../src/redis/scripts.js';
import { EventLog } from '../../src/events/eventLog.js';
import { keys } from '../../src/redis/keys.js';
import type { EventPayload } from '../../src/events/payloads.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { uid } from '../support/fixtures.js';
import { sleep } from '../support/wait.js';

/**
 * The event log's periodic age check (lua/appendEvents.lua): it trims entries past the age limit,
 * recounts the log and renews the keys' expiry. An append that makes the stream (a new user, or a
 * log that expired or was lost as a whole) knows the count without reading the stream back; every
 * other age check reads it. Driven straight through the script on a real Redis, with a 10 s age
 * limit so the check comes due every 100 ms.
 */

let redis: RedisServer;
let client: RedisClient;
let log: EventLog;
const ks = { prefix: 'cb', shards: 8 };
const MAX_AGE_MS = 10_000;

beforeAll(async () => {
  redis = await startRedis();
  client = connectRedis(redis.url, 'commands', 'test', TEST_REDIS_COMMAND_TIMEOUT_MS);
  await client.connect();
  await loadScripts(client);
  log = new EventLog(client, { ...ks, maxLen: 5000, maxAgeMs: MAX_AGE_MS, metaTtlMs: 7 * MAX_AGE_MS });
});

afterAll(async () => {
  client?.disconnect();
  await redis?.stop();
});

const payload = (n: number): EventPayload => ({ schemaVersion: 1, type: 'call.renamed', eventId: `ev-${n}`, callId: `call-${n}`, revision: '2', occurredAtMs: 1 } as unknown as EventPayload);
const deliveries = (userId: string, entryIds: string[]) => entryIds.map((entryId, i) => ({ entryId, delivery: { userId, payload: payload(i) } }));

/** How often Redis ran each command so far (scripts' inner commands included). */
async function calls(...names: string[]): Promise<number[]> {
  const info = await client.info('commandstats');
  return names.map((n) => Number(new RegExp(`cmdstat_${n}:calls=(\\d+)`).exec(info)?.[1] ?? 0));
}
const meta = (userId: string) => client.hgetall(keys.eventLogMeta(ks, userId));

/**
 * The key expires at least `aheadMs` after `appendedAt` (Date.now() taken before the append): what
 * is left of it now, less the time since, so a slow machine cannot fail it.
 */
async function expectExpiryAhead(key: string, aheadMs: number, appendedAt: number): Promise<void> {
  const ttl = await client.pttl(key);
  expect(ttl).toBeGreaterThanOrEqual(aheadMs - (Date.now() - appendedAt));
}

describe('age check', () => {
  it('a new log: its count and expiry are set without reading the stream back', async () => {
    const user = uid('user');
    const before = await calls('xrevrange', 'xlen');
    const appendedAt = Date.now();
    await log.append(user, 1, deliveries(user, ['1000-0', '1001-0']));
    expect(await calls('xrevrange', 'xlen')).toEqual(before);
    expect((await meta(user)).n).toBe('2');
    expect(await client.xlen(keys.eventLog(ks, user))).toBe(2);
    await expectExpiryAhead(keys.eventLog(ks, user), MAX_AGE_MS, appendedAt);
    await expectExpiryAhead(keys.eventLogMeta(ks, user), 7 * MAX_AGE_MS, appendedAt);
  });

  it('a log lost as a whole: the new stream counts only its new entries, and what came before counts as trimmed', async () => {
    const user = uid('user');
    await log.append(user, 1, deliveries(user, ['1000-0', '1001-0', '1002-0']));
    const lastBefore = (await meta(user)).last;
    await client.del(keys.eventLog(ks, user));
    const before = await calls('xrevrange', 'xlen');
    const appendedAt = Date.now();
    await log.append(user, 1, deliveries(user, ['1003-0']));
    expect(await calls('xrevrange', 'xlen')).toEqual(before);
    const m = await meta(user);
    expect(m.n).toBe('1');
    expect(m.trimmed).toBe(lastBefore);
    await expectExpiryAhead(keys.eventLog(ks, user), MAX_AGE_MS, appendedAt);
  });

  it('a busy marker set for a user without a log: the meta hash it makes expires like any other', async () => {
    const user = uid('user');
    const appendedAt = Date.now();
    await log.append(user, 1, [], { op: 'set', callId: 'call-1' });
    expect((await meta(user)).active).toBe('call-1');
    await expectExpiryAhead(keys.eventLogMeta(ks, user), 7 * MAX_AGE_MS, appendedAt);
  });

  it('an existing log: the check comes due after ageCheckMs, reads the stream and recounts it', async () => {
    const user = uid('user');
    await log.append(user, 1, deliveries(user, ['1000-0']));
    // A count gone wrong (as after a manual XDEL) is put right by the next check.
    await client.hset(keys.eventLogMeta(ks, user), 'n', '7');
    await sleep(150);
    const [xlenBefore] = await calls('xlen');
    await log.append(user, 1, deliveries(user, ['1001-0']));
    expect((await calls('xlen'))[0]).toBe(xlenBefore! + 1);
    expect((await meta(user)).n).toBe('2');
  });
});
