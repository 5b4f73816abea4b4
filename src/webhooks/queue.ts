import type { Queue, ConnectionOptions, DefaultJobOptions } from 'bullmq';
import { createPartitionQueues, oneRunJobOptions, type Partitioning } from '../redis/partitions.js';
import type { WebhookEventType } from './endpoints.js';
import type { TokenRemoval } from '../push/registry.js';

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
  /**
   * push.token_removed: the removal it announces, queued before it was made. Each attempt makes
   * sure of it first, and the notice is dropped if the token was registered again meanwhile.
   */
  tokenRemoval?: TokenRemoval;
}

export interface WebhookJob {
  /** Attempts each delivery has had before this run. */
  attempts: number;
  deliveries: WebhookDelivery[];
}

/** A failed delivery goes into a new delayed job (above). */
export const WEBHOOK_JOB_OPTIONS: DefaultJobOptions = oneRunJobOptions(86_400);

export function createWebhookQueues(connection: ConnectionOptions, p: Partitioning): Queue<WebhookJob>[] {
  return createPartitionQueues(WEBHOOK_QUEUE, connection, p, WEBHOOK_JOB_OPTIONS);
}
