import type { Redis, Cluster } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import { runScript } from '../redis/scripts.js';
import { CorruptRecordError } from '../calls/model.js';
import { earlyNoticeArg } from '../calls/store.js';
import { topologyOf } from '../redis/connection.js';
import { retentionArg, type Retention } from '../calls/retention.js';

/**
 * One ring sweep pass over some call shards (docs/architecture.md "Ring timers"). Each call script keeps its
 * shard's ring index (a sorted set of ringing callIds by expiresAtMs, `keys.ringingForShard`):
 * createCall.lua adds the call, and every script that stops it ringing removes it. A pass reads
 * each shard's due entries (one auto-pipelined round trip for all shards), then runs
 * lua/expireDue.lua per shard with those that were due, which checks each one again and ends it
 * only if it is still in the index, due and ringing. Stale reads, a second sweeper or an answer
 * racing the deadline are therefore harmless: exactly one of them changes the call.
 */

export interface SweepSettings extends KeySpace, Retention {
  /** Due calls taken per shard per script call. */
  pageSize: number;
}

export interface SweepResult {
  /** Calls this pass ended as `unanswered`. */
  ended: number;
  /** For each of them, how long after its expiresAtMs it ended (ms). */
  lateMs: number[];
}

/**
 * When each shard next needs a look (Redis ms), so an idle shard costs no read every tick. A call
 * is indexed with expiresAtMs = its creation + RING_TIMEOUT_MS, so one created after a look is due
 * no sooner than that look + RING_TIMEOUT_MS: after a look a shard can wait until its earliest
 * deadline, and at most `maxIdleMs` (at most RING_TIMEOUT_MS; shorter, so that a process started
 * with a shorter ring timeout during a configuration change is late by no more than that).
 */
export class SweepSchedule {
  private readonly nextLookAt = new Map<number, number>();

  constructor(private readonly maxIdleMs: number) {}

  due(shard: number, redisNowMs: number): boolean {
    return (this.nextLookAt.get(shard) ?? 0) <= redisNowMs;
  }

  looked(shard: number, redisNowMs: number, earliestMs: number | undefined): void {
    this.nextLookAt.set(shard, Math.min(earliestMs ?? Infinity, redisNowMs + this.maxIdleMs));
  }
}

/**
 * Ends every due call of `shards`. `redisNowMs` is Redis's clock as the caller estimates it (the
 * script decides with Redis's own TIME, so an estimate that runs ahead only costs a wasted check).
 * With a `schedule`, only the shards it says are due are read, and it learns each one's earliest
 * deadline (read in the same round trip).
 */
export async function sweepShards(
  redis: Redis | Cluster,
  s: SweepSettings,
  shards: readonly number[],
  redisNowMs: number,
  schedule?: SweepSchedule,
): Promise<SweepResult> {
  const result: SweepResult = { ended: 0, lateMs: [] };
  let pending = schedule ? shards.filter((shard) => schedule.due(shard, redisNowMs)) : [...shards];
  // Shards with more due calls than one page are swept again at once.
  while (pending.length > 0) {
    const dueReads = Promise.all(
      pending.map((shard) => redis.zrange(keys.ringingForShard(s, shard), '-inf', String(redisNowMs), 'BYSCORE', 'LIMIT', 0, s.pageSize)),
    );
    // Each shard's earliest deadline still to come, in the same write.
    const earliestReads = schedule
      ? Promise.all(pending.map((shard) => redis.zrange(keys.ringingForShard(s, shard), `(${redisNowMs}`, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')))
      : undefined;
    const [due, earliest] = await Promise.all([dueReads, earliestReads]);
    if (schedule && earliest) {
      // A shard that had due calls is looked at again next tick (the script may have found one not
      // due yet by Redis's own clock).
      pending.forEach((shard, i) => {
        const next = due[i]!.length > 0 ? redisNowMs : earliest[i]!.length > 0 ? Number(earliest[i]![1]) : undefined;
        schedule.looked(shard, redisNowMs, next);
      });
    }
    const replies = await Promise.all(
      pending.map((shard, i) => {
        const callIds = due[i]!;
        if (callIds.length === 0) return undefined;
        return runScript(
          redis,
          'expireDue',
          [keys.ringingForShard(s, shard), keys.outboxForShard(s, shard), ...callIds.map((id) => keys.call(s, id))],
          { retention: retentionArg(s), earlyNotice: earlyNoticeArg(topologyOf(redis)), callIds },
        );
      }),
    );
    for (const reply of replies) {
      if (reply === undefined) continue;
      const [ended, ...late] = parseExpireDueReply(reply);
      result.ended += ended!;
      result.lateMs.push(...late);
    }
    pending = pending.filter((_, i) => due[i]!.length >= s.pageSize);
  }
  return result;
}

export function parseExpireDueReply(reply: unknown): number[] {
  if (!Array.isArray(reply) || reply.length === 0 || !reply.every((n) => typeof n === 'number')) {
    throw new CorruptRecordError('unexpected expireDue reply');
  }
  return reply as number[];
}
