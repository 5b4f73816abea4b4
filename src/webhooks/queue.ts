import { Queue, type ConnectionOptions, type DefaultJobOptions } from 'bullmq';
import { partitionQueueName, queuePrefix, QUEUE_STREAMS, type Partitioning } from '../redis/partitions.js';
import type { WebhookEventType } from './endpoints.js';

/**
 * Webhook deliveries as BullMQ work (docs/webhooks.md "Delivery"), partitioned like the push
 * queues (`{webhook-<p>}`, by the call's shard) so a cluster spreads them. The relay adds one job
 * per batch and partition carrying every delivery of the batch; a run that leaves some failing
 * adds one delayed job per retry delay with just those, so a dead receiver never holds back a
 * live one. Jobs have their own queues and workers: nothing on the call path waits for them.
 */
export const WEBHOOK_QUEUE = 'webhook';

/** One event for one endpoint. */
export interface WebhookDelivery {
  endpointId: string;
  webhookId: string;
  type: WebhookEventType;
  /** The request body, fixed at the first attempt (the signature's timestamp is each attempt's). */
  body: string;
}

export interface WebhookJob {
  /** Attempts each delivery has had before this run. */
  attempts: number;
  deliveries: WebhookDelivery[];
}

export const WEBHOOK_JOB_OPTIONS: DefaultJobOptions = {
  // A failed delivery goes into a new delayed job (above); a run a crash cut short is run again by
  // BullMQ's stalled-job check.
  attempts: 1,
  removeOnComplete: true,
  removeOnFail: { age: 86_400, count: 1000 },
};

export function createWebhookQueues(connection: ConnectionOptions, p: Partitioning): Queue<WebhookJob>[] {
  return Array.from(
    { length: p.partitions },
    (_, i) =>
      new Queue<WebhookJob>(partitionQueueName(WEBHOOK_QUEUE, i), {
        connection,
        prefix: queuePrefix(p.prefix),
        defaultJobOptions: WEBHOOK_JOB_OPTIONS,
        streams: QUEUE_STREAMS,
      }),
  );
}
