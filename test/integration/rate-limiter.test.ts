import { describe, expect, it } from 'vitest';
import { RedisRateLimiter } from '../../src/limits/rateLimiter.js';
import { fileRedis } from '../support/fixtures.js';
import { sleep } from '../support/wait.js';

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
    await sleep(350);
    expect((await l.hit({ userId: 'c' })).allowed).toBe(true);
  });

  it('a window\'s first hit is one SET … NX GET that gives the counter its expiry; a later hit adds an INCR', async () => {
    const calls = async () => {
      const stats = await db.redis.info('commandstats');
      return Object.fromEntries(['set', 'incr', 'pexpire'].map((c) => [c, Number(new RegExp(`cmdstat_${c}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)]));
    };
    const l = limiter(2, 60_000);
    await l.hit({ userId: 'warm-f' }); // the script is loaded
    const before = await calls();
    expect((await l.hit({ userId: 'f' })).allowed).toBe(true);
    expect(await calls()).toEqual({ ...before, set: before.set! + 1 });
    expect(await db.redis.get('limit:f')).toBe('1');
    expect(await db.redis.pttl('limit:f')).toBeGreaterThan(59_000);
    expect((await l.hit({ userId: 'f' })).allowed).toBe(true);
    expect(await calls()).toEqual({ ...before, set: before.set! + 2, incr: before.incr! + 1 });
    expect(await db.redis.get('limit:f')).toBe('2');
    expect((await l.hit({ userId: 'f' })).allowed).toBe(false);
  });

  it('a counter left without expiry (a process died between INCR and PEXPIRE) gets one at its first refused hit', async () => {
    await db.redis.set('limit:d', '7');
    const refused = await limiter(5, 60_000).hit({ userId: 'd' });
    expect(refused).toEqual({ allowed: false, retryAfterMs: 60_000 });
    const ttl = await db.redis.pttl('limit:d');
    expect(ttl).toBeGreaterThan(59_000);
  });

  it('hits made in one turn share one script call on a single Redis, each counted under its own rule', async () => {
    const evalshas = async () => Number(/cmdstat_evalsha:calls=(\d+)/.exec(await db.redis.info('commandstats'))?.[1] ?? 0);
    const tight = limiter(1, 60_000);
    const loose = limiter(5, 60_000);
    await tight.hit({ userId: 'warm' }); // the script is loaded (a first EVALSHA may fall back to EVAL)
    const before = await evalshas();
    const decisions = await Promise.all([tight.hit({ userId: 'e' }), tight.hit({ userId: 'e' }), loose.hit({ userId: 'e2' }), loose.hit({ userId: 'e2' })]);
    expect(await evalshas()).toBe(before + 1);
    expect(decisions.map((d) => d.allowed)).toEqual([true, false, true, true]);
    expect(decisions[1]!.retryAfterMs).toBeGreaterThan(59_000);
    expect(await db.redis.get('limit:e2')).toBe('2');
  });
});
