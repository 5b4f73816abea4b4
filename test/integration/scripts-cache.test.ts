import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { loadScripts, runScript } from '../../src/redis/scripts.js';

/**
 * Scripts run by EVALSHA; when Redis lost its script cache (a restart without the server
 * noticing, SCRIPT FLUSH) the call falls back to EVAL, which also caches the script again.
 */
let server: RedisServer;
let redis: Redis;
beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url, { enableAutoPipelining: true });
});
afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

describe('script cache', () => {
  it('a script runs after SCRIPT FLUSH and is cached again for the next EVALSHA', async () => {
    await loadScripts(redis);
    await redis.script('FLUSH');
    const channel = 'live:test';
    // publishMessages answers how many messages it published.
    expect(await runScript(redis, 'publishMessages', [channel], ['', '{"n":1}'])).toBe(1);
    const infoBefore = await redis.info('commandstats');
    const evalCalls = (info: string) => Number(/cmdstat_eval:calls=(\d+)/.exec(info)?.[1] ?? 0);
    expect(evalCalls(infoBefore)).toBe(1);
    // Cached again: the next call is a plain EVALSHA.
    expect(await runScript(redis, 'publishMessages', [channel], ['', '{"n":2}', '', '{"n":3}'])).toBe(2);
    expect(evalCalls(await redis.info('commandstats'))).toBe(1);
  });

  it('a wrong number of keys is refused before anything reaches Redis', async () => {
    await expect(runScript(redis, 'publishMessages', [], ['', '{}'])).rejects.toThrow('publishMessages takes 1 keys, got 0');
  });
});
