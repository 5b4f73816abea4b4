import { describe, expect, it } from 'vitest';
import { RedisRateLimiter } from '../../src/limits/rateLimiter.js';
import { fileRedis } from '../support/fixtures.js';

/** The shared fixed-window limiter on a real Redis: its counters, their expiry, and the safety net. */
const db = fileRedis();

const limiter = (limit: number, windowMs: number) => new RedisRateLimiter<{ userId: string }>(db.redis, { limit, windowMs }, (s) => `limit:${s.userId}`);

describe('Redis rate limiter', () => {
  it('allows `limit` hits per window, then refuses with the rest of the window; subjects are counted apart', async () => {
    const l = limiter(3, 60_000);
    for (let i = 0; i < 3; i++) expect(await l.hit({ userId: 'a' })).toEqual({ allowed: true, retryAfterMs: 0 });
    const refused = await l.hit({ userId: 'a' });
    expect(refused.allowed).toBe(false);
    expect(refused.retryAfterMs).toBeGreaterThan(59_000);
    expect(refused.retryAfterMs).toBeLessThanOrEqual(60_000);
    expect(await l.hit({ userId: 'b' })).toEqual({ allowed: true, retryAfterMs: 0 });
  });

  it('the hit that opens a window gives the counter its expiry; a new window starts once it lapses', async () => {
    const l = limiter(1, 300);
    expect((await l.hit({ userId: 'c' })).allowed).toBe(true);
    const ttl = await db.redis.pttl('limit:c');
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(300);
    expect((await l.hit({ userId: 'c' })).allowed).toBe(false);
    await new Promise((r) => setTimeout(r, 350));
    expect((await l.hit({ userId: 'c' })).allowed).toBe(true);
  });

  it('a counter left without expiry (a process died between INCR and PEXPIRE) gets one at its first refused hit', async () => {
    await db.redis.set('limit:d', '7');
    const refused = await limiter(5, 60_000).hit({ userId: 'd' });
    expect(refused).toEqual({ allowed: false, retryAfterMs: 60_000 });
    const ttl = await db.redis.pttl('limit:d');
    expect(ttl).toBeGreaterThan(59_000);
  });
});
