import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { ConnectionOptions } from 'bullmq';
import type { Config } from '../config/config.js';
import type { ChangeHandler } from '../calls/change.js';
import type { Metrics } from '../observability/metrics.js';
import { keys } from '../redis/keys.js';
import type { RedisClient } from '../redis/connection.js';
import type { Partitioning } from '../redis/partitions.js';
import type { PushRegistration, PushRegistry, TokenRemoval } from '../push/registry.js';
import type { Logger } from '../util/logger.js';
import type { WebhookEndpoint } from './endpoints.js';
import type { EndpointStates } from './endpointStates.js';
import type { DeadLetters } from './deadLetters.js';
import { createWebhookQueues } from './queue.js';
import { WebhookPublisher, webhookHandler } from './publisher.js';
import { WebhookDeliverer, startWebhookWorkers } from './deliverer.js';
import { WebhookStreamReader } from './streamReader.js';
import { tokenRemovedEvent } from './events.js';

/**
 * The worker role's webhooks (docs/webhooks.md): the relay handler that adds the call events to
 * the webhook streams, the push.token_removed notice, the stream readers that send first
 * attempts, the BullMQ workers that send retries, and their metrics. Without endpoints there is
 * nothing: no stream, no queue, no worker, no handler.
 */
export interface WebhookDeps {
  endpoints: readonly WebhookEndpoint[];
  states: EndpointStates;
  deadLetters: DeadLetters;
}

type TokenRemoved = (reg: PushRegistration, reason: string, removal: TokenRemoval) => Promise<void>;

export interface Webhooks {
  handlers: ChangeHandler[];
  tokenRemoved: TokenRemoved | undefined;
  close(): Promise<void>;
}

export async function startWebhooks(
  deps: WebhookDeps,
  o: {
    redis: RedisClient;
    connection: ConnectionOptions;
    /** Makes a connection for one stream reader's blocking reads. */
    blockingConnection: () => Promise<RedisClient>;
    partitioning: Partitioning;
    config: Config;
    metrics: Metrics;
    logger: Logger;
    registry: PushRegistry;
  },
): Promise<Webhooks> {
  const { config, metrics } = o;
  metrics.gauge('webhook_dead_letters', 'Webhook deliveries that exhausted their retries, kept for replay', () => o.redis.zcard(keys.webhookDeadLetterOrder(o.partitioning)));
  metrics.gauge('webhook_endpoints_disabled', 'Webhook endpoints disabled by a 410 answer', async () => (await deps.states.all()).size);
  const queues = deps.endpoints.length > 0 ? createWebhookQueues(o.connection, o.partitioning) : [];
  metrics.gauge('queue_webhook_waiting', 'Webhook retry jobs waiting, delayed or running (all partitions)', async () => {
    const counts = await Promise.all(queues.map((q) => q.getJobCounts('waiting', 'delayed', 'active', 'prioritized')));
    return counts.reduce((sum, c) => sum + Object.values(c).reduce((a, b) => a + b, 0), 0);
  });
  metrics.gauge('webhook_stream_entries', 'Webhook stream entries not yet removed: first attempts waiting, being sent, or sent within the last second (all partitions)', async () => {
    const lengths = await Promise.all(queues.map((_, p) => o.redis.xlen(keys.webhookStream(o.partitioning, p))));
    return lengths.reduce((a, b) => a + b, 0);
  });
  if (queues.length === 0) return { handlers: [], tokenRemoved: undefined, close: async () => {} };

  const publisher = new WebhookPublisher(deps.endpoints, o.redis, o.partitioning, deps.states);
  const deliverer = new WebhookDeliverer({
    ...deps,
    scheduleMs: config.WEBHOOK_RETRY_SCHEDULE,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    ensureRemoved: (t) => o.registry.ensureRemoved(t),
    logger: o.logger,
    observe: (endpoint, outcome, seconds) => {
      metrics.webhookDeliveries.inc({ endpoint, outcome });
      if (outcome !== 'skipped') metrics.webhookDuration.observe({ endpoint }, seconds);
    },
  });
  const workers = startWebhookWorkers(o.connection, o.partitioning, queues, config.WEBHOOK_CONCURRENCY, deliverer, o.logger);
  const consumer = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const readers = await Promise.all(
    queues.map(async (queue, p) => {
      const reader = new WebhookStreamReader(o.redis, keys.webhookStream(o.partitioning, p), consumer, config.WEBHOOK_CONCURRENCY, (id, deliveries) => deliverer.deliver(deliveries, 0, queue, `wh.${id}`), o.logger);
      await reader.start(await o.blockingConnection());
      return reader;
    }),
  );
  return {
    handlers: [webhookHandler(publisher)],
    tokenRemoved: (reg, reason, tokenRemoval) => publisher.publish([{ event: tokenRemovedEvent({ ...reg, reason }, Date.now()), tokenRemoval }]),
    // After the relay stopped: the readers and workers finish what they are sending.
    async close() {
      await Promise.all([...readers.map((r) => r.stop()), ...workers.map((w) => w.close())]);
      await Promise.all(queues.map((q) => q.close()));
    },
  };
}
