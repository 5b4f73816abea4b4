import type { Redis, Cluster } from 'ioredis';

/**
 * Abuse limits. Shared limits (per user, per installation) are counted in Redis so they hold
 * across processes; per-connection and per-IP limits are counted in process memory (they are
 * checked on every message or before authentication, where a Redis round trip would cost more
 * than the abuse it prevents).
 */

export interface LimitDecision {
  allowed: boolean;
  retryAfterMs: number;
}

export interface LimitRule {
  limit: number;
  windowMs: number;
}

/**
 * A fixed-window counter in Redis per subject (a user, an installation): the limiter knows how its
 * counters are keyed, callers name only whom they count. An allowed hit costs one INCR; the hit
 * that opens a window also gives the counter its expiry, and only a hit over the limit reads the
 * window's rest. (INCR and PEXPIRE are not atomic together: a process that dies between them
 * leaves a counter without expiry. The first hit over the limit then finds no expiry and sets one,
 * so such a subject is held for at most one window more than it should be.)
 */
export class RedisRateLimiter<Subject> {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly rule: LimitRule,
    private readonly keyOf: (subject: Subject) => string,
  ) {}

  async hit(subject: Subject): Promise<LimitDecision> {
    const key = this.keyOf(subject);
    const { limit, windowMs } = this.rule;
    const hits = await this.redis.incr(key);
    if (hits === 1) await this.redis.pexpire(key, windowMs);
    if (hits <= limit) return { allowed: true, retryAfterMs: 0 };
    let ttl = await this.redis.pttl(key);
    if (ttl < 0) {
      await this.redis.pexpire(key, windowMs);
      ttl = windowMs;
    }
    return { allowed: false, retryAfterMs: ttl };
  }
}

/** A token bucket in memory: `limit` tokens refilled evenly over `windowMs`. */
export class TokenBucket {
  private tokens: number;
  private updatedAt: number;

  constructor(
    private readonly rule: LimitRule,
    now = Date.now(),
  ) {
    this.tokens = rule.limit;
    this.updatedAt = now;
  }

  take(now = Date.now()): LimitDecision {
    const perMs = this.rule.limit / this.rule.windowMs;
    this.tokens = Math.min(this.rule.limit, this.tokens + (now - this.updatedAt) * perMs);
    this.updatedAt = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return { allowed: true, retryAfterMs: 0 };
    }
    return { allowed: false, retryAfterMs: Math.ceil((1 - this.tokens) / perMs) };
  }
}

/**
 * Failed authentications per IP, in memory. Counting only failures keeps honest clients free;
 * an address over the limit is refused (429) before its token is even verified.
 */
export class FailureCounter {
  private readonly windows = new Map<string, { count: number; resetAt: number }>();
  /** The latest end of a window that reached the limit: no address is blocked after it. */
  private blockingUntil = 0;

  constructor(private readonly rule: LimitRule) {}

  /** Whether any address may be over the limit now (callers skip reading the address if not). */
  anyBlocked(now = Date.now()): boolean {
    return now < this.blockingUntil;
  }

  blocked(key: string, now = Date.now()): LimitDecision {
    const w = this.windows.get(key);
    if (!w || w.resetAt <= now) return { allowed: true, retryAfterMs: 0 };
    return w.count >= this.rule.limit ? { allowed: false, retryAfterMs: w.resetAt - now } : { allowed: true, retryAfterMs: 0 };
  }

  fail(key: string, now = Date.now()): void {
    let w = this.windows.get(key);
    if (!w || w.resetAt <= now) this.windows.set(key, (w = { count: 0, resetAt: now + this.rule.windowMs }));
    w.count++;
    if (w.count >= this.rule.limit) this.blockingUntil = Math.max(this.blockingUntil, w.resetAt);
    if (this.windows.size > 100_000) this.sweep(now);
  }

  /** Drops expired windows so memory stays bounded under address-spraying. */
  sweep(now = Date.now()): void {
    for (const [k, w] of this.windows) if (w.resetAt <= now) this.windows.delete(k);
  }
}
