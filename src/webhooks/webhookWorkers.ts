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
import { tokenRemovedEvent } from './events.js';

/**
 * The worker role's webhooks (docs/webhooks.md): the relay handler that queues the call events,
 * the push.token_removed notice, the delivery workers and their metrics. Without endpoints there
 * is nothing: no queue, no worker, no handler.
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

export function startWebhooks(
  deps: WebhookDeps,
  o: { redis: RedisClient; connection: ConnectionOptions; partitioning: Partitioning; config: Config; metrics: Metrics; logger: Logger; registry: PushRegistry },
): Webhooks {
  const { config, metrics } = o;
  metrics.gauge('webhook_dead_letters', 'Webhook deliveries that exhausted their retries, kept for replay', () => o.redis.zcard(keys.webhookDeadLetterOrder(o.partitioning)));
  metrics.gauge('webhook_endpoints_disabled', 'Webhook endpoints disabled by a 410 answer', async () => (await deps.states.all()).size);
  const queues = deps.endpoints.length > 0 ? createWebhookQueues(o.connection, o.partitioning) : [];
  metrics.gauge('queue_webhook_waiting', 'Webhook delivery jobs waiting, delayed or running (all partitions)', async () => {
    const counts = await Promise.all(queues.map((q) => q.getJobCounts('waiting', 'delayed', 'active', 'prioritized')));
    return counts.reduce((sum, c) => sum + Object.values(c).reduce((a, b) => a + b, 0), 0);
  });
  if (queues.length === 0) return { handlers: [], tokenRemoved: undefined, close: async () => {} };

  const publisher = new WebhookPublisher(deps.endpoints, queues, o.partitioning, deps.states);
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
  return {
    handlers: [webhookHandler(publisher)],
    tokenRemoved: (reg, reason, tokenRemoval) => publisher.publish([{ event: tokenRemovedEvent({ ...reg, reason }, Date.now()), tokenRemoval }]),
    // After the relay stopped: the workers finish their running jobs.
    async close() {
      await Promise.all(workers.map((w) => w.close()));
      await Promise.all(queues.map((q) => q.close()));
    },
  };
}
