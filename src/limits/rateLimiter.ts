import type { Redis, Cluster } from 'ioredis';
import { runScript } from '../redis/scripts.js';
import { topologyOf } from '../redis/connection.js';

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
 * A subject's counter on a limiter (RedisRateLimiter.counter): hit on its own (`hit`), or on a
 * single Redis by a script that counts it as its own first step (its key and rule: a create's
 * limits, lua/includes/createLimits.lua), so the hit costs no script call of its own.
 */
export interface Counter {
  readonly key: string;
  readonly rule: LimitRule;
  hit(): Promise<LimitDecision>;
}

/**
 * A fixed-window counter in Redis per subject (a user, an installation): the limiter knows how its
 * counters are keyed, callers name only whom they count. A hit is one step of lua/hitRateLimit.lua:
 * the counter is set with its expiry when the hit opens a window, else incremented; only a hit
 * over the limit reads the window's rest. The rule itself lives in lua/includes/fixedWindow.lua,
 * which the create scripts (their limits, on a single Redis) and the in-call message script count
 * with too.
 *
 * On a single Redis the hits made in one turn of the event loop (an invite's invitees, say) share
 * one script call (HitBatch); on a cluster each counter lives in its own slot and gets a call of
 * its own.
 */
export class RedisRateLimiter<Subject> {
  private readonly batch: HitBatch | undefined;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly rule: LimitRule,
    private readonly keyOf: (subject: Subject) => string,
  ) {
    this.batch = topologyOf(redis) === 'single' ? hitBatchOf(redis) : undefined;
  }

  hit(subject: Subject): Promise<LimitDecision> {
    return this.hitKey(this.keyOf(subject));
  }

  /** The subject's counter, for a caller that hits it now or lets a script hit it (Counter). */
  counter(subject: Subject): Counter {
    const key = this.keyOf(subject);
    return { key, rule: this.rule, hit: () => this.hitKey(key) };
  }

  private async hitKey(key: string): Promise<LimitDecision> {
    const retryAfterMs = this.batch ? await this.batch.hit(key, this.rule) : Number(((await runScript(this.redis, 'hitRateLimit', [key], { rules: ruleArgs(this.rule) })) as unknown[])[0]);
    return { allowed: retryAfterMs === 0, retryAfterMs };
  }
}

const ruleArgs = (rule: LimitRule): string[] => [String(rule.limit), String(rule.windowMs)];

/** The hits queued on one Redis connection until the current turn's microtasks run. */
class HitBatch {
  private queued: { key: string; rule: LimitRule; done: (retryAfterMs: number) => void; failed: (err: unknown) => void }[] = [];

  constructor(private readonly redis: Redis | Cluster) {}

  hit(key: string, rule: LimitRule): Promise<number> {
    return new Promise((done, failed) => {
      if (this.queued.push({ key, rule, done, failed }) === 1) queueMicrotask(() => this.send());
    });
  }

  private send(): void {
    const hits = this.queued;
    this.queued = [];
    runScript(this.redis, 'hitRateLimit', hits.map((h) => h.key), { rules: hits.flatMap((h) => ruleArgs(h.rule)) }).then(
      (reply) => hits.forEach((h, i) => h.done(Number((reply as unknown[])[i]))),
      (err: unknown) => hits.forEach((h) => h.failed(err)),
    );
  }
}

const batches = new WeakMap<Redis | Cluster, HitBatch>();

function hitBatchOf(redis: Redis | Cluster): HitBatch {
  let b = batches.get(redis);
  if (!b) batches.set(redis, (b = new HitBatch(redis)));
  return b;
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
