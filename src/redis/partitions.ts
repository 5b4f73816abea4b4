import { Queue, type ConnectionOptions, type DefaultJobOptions } from 'bullmq';
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

/**
 * Job options of the queues whose failed work goes on as new jobs (push retries, webhook
 * deliveries): one run per job, dropped once done; a run a crash cut short is run again by
 * BullMQ's stalled-job check; failed jobs (a bug) kept `failedAgeS` for a look, at most 1,000.
 */
export function oneRunJobOptions(failedAgeS: number): DefaultJobOptions {
  return { attempts: 1, removeOnComplete: true, removeOnFail: { age: failedAgeS, count: 1000 } };
}

/** One BullMQ queue per partition of `base` (`{base-<p>}`), with these job options. */
export function createPartitionQueues<T>(base: string, connection: ConnectionOptions, p: Partitioning, defaultJobOptions: DefaultJobOptions): Queue<T>[] {
  return Array.from(
    { length: p.partitions },
    (_, i) => new Queue<T>(partitionQueueName(base, i), { connection, prefix: queuePrefix(p.prefix), defaultJobOptions, streams: QUEUE_STREAMS }),
  );
}
