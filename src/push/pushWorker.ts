import { Worker, type ConnectionOptions } from 'bullmq';
import { partitionQueueName, queuePrefix, type Partitioning } from '../redis/partitions.js';
import { PUSH_QUEUE, type PushRetryJob } from './queues.js';
import type { PushDispatcher } from './dispatcher.js';
import type { Logger } from '../util/logger.js';

/** The push retry workers: one per queue partition, each running retry jobs through the dispatcher. */
export function startPushRetryWorkers(
  connection: ConnectionOptions,
  p: Partitioning,
  concurrency: number,
  dispatcher: PushDispatcher,
  logger: Logger,
): Worker<PushRetryJob>[] {
  return Array.from({ length: p.partitions }, (_, i) => {
    const name = partitionQueueName(PUSH_QUEUE, i);
    const worker = new Worker<PushRetryJob>(name, (job) => dispatcher.send(job.data.messages, job.data.attempts), {
      connection,
      prefix: queuePrefix(p.prefix),
      concurrency,
    });
    worker.on('error', (err) => logger.error({ err, queue: name }, 'push retry worker error'));
    return worker;
  });
}
