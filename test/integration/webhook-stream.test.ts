import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_REDIS_COMMAND_TIMEOUT_MS } from '../support/server.js';
import { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { relayBlockingConnection } from '../support/fixtures.js';
import { connectRedis } from '../../src/redis/connection.js';
import { keys } from '../../src/redis/keys.js';
import { WEBHOOK_GROUP, WebhookStreamReader } from '../../src/webhooks/streamReader.js';
import type { WebhookDelivery } from '../../src/webhooks/queue.js';
import { createLogger } from '../../src/util/logger.js';
import { waitUntil, sleep } from '../support/wait.js';

/**
 * A webhook stream's reader (src/webhooks/streamReader.ts; docs/webhooks.md "Delivery") on a real
 * Redis: it sends each entry's deliveries, then acknowledges and removes the entry; and the
 * consumers of worker processes long gone, with nothing pending, leave the group.
 */

const ks = { prefix: 'whs', shards: 4 };
let server: RedisServer;
let redis: Redis;
const logger = createLogger('fatal', new Writable({ write: (_c, _e, cb) => cb() }));

beforeAll(async () => {
  server = await startRedis();
  redis = connectRedis(server.url, 'commands', 'test', TEST_REDIS_COMMAND_TIMEOUT_MS);
  await redis.connect();
});
afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

const delivery = (n: number): WebhookDelivery => ({ endpointId: 'app', webhookId: `msg_${n}`, type: 'call.ended', body: `{"n":${n}}` });

const consumersOf = async (key: string) => ((await redis.xinfo('CONSUMERS', key, WEBHOOK_GROUP)) as unknown[][]).map((c) => String(c[1]));

describe('webhook stream reader', () => {
  it('sends every entry once, then acknowledges and removes it', async () => {
    const key = keys.webhookStream(ks, 0);
    const sent: { id: string; deliveries: readonly WebhookDelivery[] }[] = [];
    const reader = new WebhookStreamReader(redis, key, 'worker-a', 4, async (id, deliveries) => void sent.push({ id, deliveries }), logger);
    await reader.start(await relayBlockingConnection(server.url));
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push(await redis.xadd(key, '*', 'd', JSON.stringify([delivery(2 * i), delivery(2 * i + 1)])));
    await waitUntil('every entry sent', () => sent.length >= 5, 5_000);
    await waitUntil('the stream acknowledged and trimmed', async () => (await redis.xlen(key)) === 0, 5_000);
    await reader.stop();
    expect(sent.map((s) => s.id)).toEqual(ids);
    expect(sent.flatMap((s) => s.deliveries.map((d) => d.webhookId))).toEqual(Array.from({ length: 10 }, (_, n) => `msg_${n}`));
    expect(((await redis.xpending(key, WEBHOOK_GROUP)) as [number])[0]).toBe(0);
  });

  it('the consumers of processes gone a while, with nothing pending, leave the group at the next start', async () => {
    const key = keys.webhookStream(ks, 1);
    await redis.xgroup('CREATE', key, WEBHOOK_GROUP, '0', 'MKSTREAM');
    await redis.xadd(key, '*', 'd', JSON.stringify([delivery(1)]));
    // One gone with its entry still pending (it is taken over, not forgotten), one gone idle.
    await redis.xreadgroup('GROUP', WEBHOOK_GROUP, 'gone-busy', 'COUNT', 1, 'STREAMS', key, '>');
    await redis.xgroup('CREATECONSUMER', key, WEBHOOK_GROUP, 'gone-idle');
    expect((await consumersOf(key)).sort()).toEqual(['gone-busy', 'gone-idle']);
    await sleep(300);
    const reader = new WebhookStreamReader(redis, key, 'worker-b', 4, async () => {}, logger, 200);
    await reader.start(await relayBlockingConnection(server.url));
    await reader.stop();
    // (worker-b becomes a consumer only once it reads an entry.)
    expect((await consumersOf(key)).filter((c) => c.startsWith('gone-'))).toEqual(['gone-busy']);
  });
});
