import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_REDIS_COMMAND_TIMEOUT_MS } from '../support/server.js';
import { connectRedis, type RedisClient } from '../../src/redis/connection.js';
import { loadScripts } from '../../src/redis/scripts.js';
import { EventLog } from '../../src/events/eventLog.js';
import { keys } from '../../src/redis/keys.js';
import type { EventPayload } from '../../src/events/payloads.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { uid } from '../support/fixtures.js';

/**
 * Exactly once in the log (docs/architecture.md "Relays"): an outbox entry handed over again is skipped, also
 * when it comes back long after, with many entries from other shards appended to the same user
 * since (pending entries claimed late after a worker died, a re-read after a Redis restart): the
 * duplicate check is not limited to the newest entries. Driven straight through
 * lua/appendEvents.lua on a real Redis.
 */

let redis: RedisServer;
let client: RedisClient;
let log: EventLog;
const ks = { prefix: 'cb', shards: 8 };

beforeAll(async () => {
  redis = await startRedis();
  client = connectRedis(redis.url, 'commands', 'test', TEST_REDIS_COMMAND_TIMEOUT_MS);
  await client.connect();
  await loadScripts(client);
  log = new EventLog(client, { ...ks, maxLen: 5000, maxAgeMs: 24 * 3600_000, metaTtlMs: 7 * 24 * 3600_000 });
});

afterAll(async () => {
  client?.disconnect();
  await redis?.stop();
});

const payload = (n: number): EventPayload => ({ schemaVersion: 1, type: 'call.renamed', eventId: `ev-${n}`, callId: `call-${n}`, revision: '2', occurredAtMs: 1 } as unknown as EventPayload);
const deliver = (userId: string, shard: number, entryId: string, n: number) => log.append(userId, shard, [{ entryId, delivery: { userId, payload: payload(n) } }]);
const length = (userId: string) => client.xlen(keys.eventLog(ks, userId));

describe('relay replays', () => {
  it('an entry replayed after 200 entries of other shards is still recognised and not appended again', async () => {
    const user = uid('user');
    await deliver(user, 1, '1000-0', 1);
    await deliver(user, 1, '1001-0', 2);
    for (let i = 0; i < 200; i++) await deliver(user, 2 + (i % 5), `${2000 + i}-0`, 100 + i);
    expect(await length(user)).toBe(202);
    // Both shard-1 entries come back (the first is older than the shard's mark).
    await deliver(user, 1, '1000-0', 1);
    await deliver(user, 1, '1001-0', 2);
    expect(await length(user)).toBe(202);
    // A genuinely new entry of that shard is appended.
    await deliver(user, 1, '1002-0', 3);
    expect(await length(user)).toBe(203);
  });

  it('an older entry of a shard that never reached this log is appended (it arrived out of order)', async () => {
    const user = uid('user');
    await deliver(user, 3, '5000-0', 1);
    await deliver(user, 3, '4000-0', 2);
    expect(await length(user)).toBe(2);
  });
});
