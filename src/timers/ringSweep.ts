import type { Redis, Cluster } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import { runScript } from '../redis/scripts.js';
import { CorruptRecordError } from '../calls/model.js';

/**
 * One ring sweep pass over some call shards (README "Ring timers"). Each call script keeps its
 * shard's ring index (a sorted set of ringing callIds by expiresAtMs, `keys.ringingForShard`):
 * createCall.lua adds the call, and every script that stops it ringing removes it. A pass reads
 * each shard's due entries (one auto-pipelined round trip for all shards), then runs
 * lua/expireDue.lua per shard with those that were due, which checks each one again and ends it
 * only if it is still in the index, due and ringing. Stale reads, a second sweeper or an answer
 * racing the deadline are therefore harmless: exactly one of them changes the call.
 */

export interface SweepSettings extends KeySpace {
  retentionMs: number;
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
 * Ends every due call of `shards`. `redisNowMs` is Redis's clock as the caller estimates it (the
 * script decides with Redis's own TIME, so an estimate that runs ahead only costs a wasted check).
 */
export async function sweepShards(redis: Redis | Cluster, s: SweepSettings, shards: readonly number[], redisNowMs: number): Promise<SweepResult> {
  const result: SweepResult = { ended: 0, lateMs: [] };
  let pending = [...shards];
  // Shards with more due calls than one page are swept again at once.
  while (pending.length > 0) {
    const due = await Promise.all(
      pending.map((shard) => redis.zrange(keys.ringingForShard(s, shard), '-inf', String(redisNowMs), 'BYSCORE', 'LIMIT', 0, s.pageSize)),
    );
    const replies = await Promise.all(
      pending.map((shard, i) => {
        const callIds = due[i]!;
        if (callIds.length === 0) return undefined;
        return runScript(
          redis,
          'expireDue',
          [keys.ringingForShard(s, shard), keys.outboxForShard(s, shard), ...callIds.map((id) => keys.call(s, id))],
          [String(s.retentionMs), ...callIds],
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
