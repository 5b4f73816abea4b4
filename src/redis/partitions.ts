import type { KeySpace } from './keys.js';

/**
 * Queue partitions: each BullMQ queue (push retries, ring sweeps) is split into `partitions`
 * queues, one hash tag each (`{push-<p>}`, `{timers-<p>}`), so on Redis Cluster they spread over
 * the primaries. A partition serves a fixed set of call shards (shard mod partitions), so the work
 * of one call always goes through the same partition.
 */
export interface Partitioning extends KeySpace {
  readonly partitions: number;
}

/** BullMQ key prefix of every queue of this deployment. */
export function queuePrefix(redisPrefix: string): string {
  return `${redisPrefix}:q`;
}

/**
 * The queue name of one partition; the braces make it the hash tag of all its keys (BullMQ
 * allows no ':' in a queue name).
 */
export function partitionQueueName(base: string, partition: number): string {
  return `{${base}-${partition}}`;
}

export function partitionOfShard(shard: number, partitions: number): number {
  return shard % partitions;
}

/** The call shards one partition serves. */
export function shardsOfPartition(p: Partitioning, partition: number): number[] {
  const out: number[] = [];
  for (let shard = partition; shard < p.shards; shard += p.partitions) out.push(shard);
  return out;
}

/** BullMQ's own events stream is not used by this project: keep it tiny in every queue. */
export const QUEUE_STREAMS = { events: { maxLen: 100 } };
