import { Queue, Worker, type ConnectionOptions } from 'bullmq';
import type { Redis, Cluster } from 'ioredis';
import { partitionQueueName, queuePrefix, QUEUE_STREAMS, shardsOfPartition, type Partitioning } from '../redis/partitions.js';
import { sweepShards, SweepSchedule, type SweepResult, type SweepSettings } from './ringSweep.js';
import type { Logger } from '../util/logger.js';

/**
 * Ring timers as BullMQ work (docs/architecture.md "Ring timers"): every queue partition `{timers-<p>}` has a
 * job scheduler that starts one sweep job per slot (`slotMs`). The job sweeps the partition's call
 * shards every `tickMs` until its slot is over, so an unanswered call ends at most about one tick
 * (plus a pass) after its expiresAtMs, whatever the number of pending calls, and BullMQ handles one
 * job per partition per slot instead of one per call. Every worker process runs a worker per
 * partition; BullMQ gives each slot's job to one of them. When that process dies mid-slot the next
 * slot's job, scheduled as this one started, runs elsewhere. Timers live in Redis (the ring index),
 * so they survive any restart, and the lazy expiry in every call script remains the safety net.
 */

export const SWEEP_QUEUE = 'timers';
const SCHEDULER_ID = 'ring-sweep';

export interface RingSweeperSettings extends Partitioning, SweepSettings {
  /** How often a running sweep job sweeps its shards. */
  tickMs: number;
  /** How long one sweep job runs; the scheduler starts one per slot. */
  slotMs: number;
  /** RING_TIMEOUT_MS: how long an idle shard may go without a look (ringSweep.ts SweepSchedule). */
  ringTimeoutMs: number;
}

/** The longest an idle shard goes without a look, whatever the ring timeout. */
const MAX_IDLE_LOOK_MS = 1000;

const SWEEP_JOB_OPTIONS = { removeOnComplete: true, removeOnFail: { count: 100 } };

export class RingSweeper {
  private closing = false;

  private constructor(
    private readonly queues: Queue[],
    private readonly workers: Worker[],
  ) {}

  static async start(
    redis: Redis | Cluster,
    connection: ConnectionOptions,
    s: RingSweeperSettings,
    logger: Logger,
    onSweep: (r: SweepResult) => void,
  ): Promise<RingSweeper> {
    const prefix = queuePrefix(s.prefix);
    const queues: Queue[] = [];
    const workers: Worker[] = [];
    const sweeper = new RingSweeper(queues, workers);
    for (let p = 0; p < s.partitions; p++) {
      const name = partitionQueueName(SWEEP_QUEUE, p);
      const shards = shardsOfPartition(s, p);
      const schedule = new SweepSchedule(Math.min(MAX_IDLE_LOOK_MS, s.ringTimeoutMs));
      const queue = new Queue(name, { connection, prefix, streams: QUEUE_STREAMS });
      // Idempotent: every worker process makes sure the scheduler exists (a new deployment, a
      // changed slot length, or a Redis that lost it).
      await queue.upsertJobScheduler(SCHEDULER_ID, { every: s.slotMs }, { name: 'sweep', opts: SWEEP_JOB_OPTIONS });
      const worker = new Worker(name, () => sweeper.runSlot(redis, s, shards, schedule, logger, onSweep), {
        connection,
        prefix,
        concurrency: 1,
      });
      worker.on('error', (err) => logger.error({ err, queue: name }, 'ring sweep worker error'));
      queues.push(queue);
      workers.push(worker);
    }
    return sweeper;
  }

  /** One slot: sweep every tick until the slot is over (or the process shuts down). */
  private async runSlot(
    redis: Redis | Cluster,
    s: RingSweeperSettings,
    shards: readonly number[],
    schedule: SweepSchedule,
    logger: Logger,
    onSweep: (r: SweepResult) => void,
  ): Promise<number> {
    const until = Date.now() + s.slotMs - s.tickMs / 2;
    const offset = await redisClockOffsetMs(redis);
    let ended = 0;
    while (!this.closing) {
      const started = Date.now();
      try {
        const r = await sweepShards(redis, s, shards, Date.now() + offset, schedule);
        ended += r.ended;
        onSweep(r);
      } catch (err) {
        // Redis unreachable or stalled: back off for a second (not every tick), then go on; the
        // next slot's job carries on if this one ends meanwhile.
        logger.warn({ err: (err as Error).message }, 'ring sweep failed; retrying');
        await sleep(Math.max(0, Math.min(1000, until - Date.now())));
      }
      const next = started + s.tickMs;
      if (next >= until) break;
      await sleep(next - Date.now());
    }
    return ended;
  }

  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(this.workers.map((w) => w.close()));
    await Promise.all(this.queues.map((q) => q.close()));
  }
}

/** Redis's clock minus this host's (ms), from one TIME round trip. */
async function redisClockOffsetMs(redis: Redis | Cluster): Promise<number> {
  const before = Date.now();
  const [sec, usec] = (await redis.time()) as [string | number, string | number];
  const after = Date.now();
  return Number(sec) * 1000 + Math.floor(Number(usec) / 1000) - (before + after) / 2;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.max(0, ms)));
}
