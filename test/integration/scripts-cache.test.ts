import { describe, expect, it } from 'vitest';
import { loadScripts, runScript } from '../../src/redis/scripts.js';
import { fileRedis } from '../support/fixtures.js';

/**
 * Scripts run by EVALSHA; when Redis lost its script cache (a restart without the server
 * noticing, SCRIPT FLUSH) the call falls back to EVAL, which also caches the script again.
 */
const db = fileRedis();

describe('script cache', () => {
  it('a script runs after SCRIPT FLUSH and is cached again for the next EVALSHA', async () => {
    await loadScripts(db.redis);
    await db.redis.script('FLUSH');
    const channel = 'live:test';
    // publishMessages answers how many messages it published.
    expect(await runScript(db.redis, 'publishMessages', [channel], { messages: ['', '{"n":1}'] })).toBe(1);
    const infoBefore = await db.redis.info('commandstats');
    const evalCalls = (info: string) => Number(/cmdstat_eval:calls=(\d+)/.exec(info)?.[1] ?? 0);
    expect(evalCalls(infoBefore)).toBe(1);
    // Cached again: the next call is a plain EVALSHA.
    expect(await runScript(db.redis, 'publishMessages', [channel], { messages: ['', '{"n":2}', '', '{"n":3}'] })).toBe(2);
    expect(evalCalls(await db.redis.info('commandstats'))).toBe(1);
  });

  it('a wrong number of keys is refused before anything reaches Redis', async () => {
    await expect(runScript(db.redis, 'publishMessages', [], { messages: ['', '{}'] })).rejects.toThrow('publishMessages takes 1 keys, got 0');
  });
});
