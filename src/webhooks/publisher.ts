import { createHash } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { ChangeHandler } from '../events/change.js';
import { shardOf } from '../redis/keys.js';
import { partitionOfShard, type Partitioning } from '../redis/partitions.js';
import type { WebhookEndpoint } from './endpoints.js';
import type { EndpointStates } from './endpointStates.js';
import { callEventOf, webhookBody, webhookId, type WebhookEvent } from './events.js';
import type { WebhookDelivery, WebhookJob } from './queue.js';

/**
 * Turns webhook events into delivery jobs (docs/webhooks.md "Delivery"): one delivery per event and
 * endpoint that wants its type and is not disabled, one job per partition. A job's ID is derived
 * from its deliveries' webhook-ids, so a relay that hands the same batch over again while the
 * first job still waits adds nothing (and a receiver deduplicates by webhook-id anyway).
 */
export class WebhookPublisher {
  constructor(
    private readonly endpoints: readonly WebhookEndpoint[],
    private readonly queues: readonly Queue<WebhookJob>[],
    private readonly partitioning: Partitioning,
    private readonly states: EndpointStates,
  ) {}

  /** Queues the events; `callId` (when about a call) picks the partition, as for its pushes. */
  async publish(events: readonly { event: WebhookEvent; callId?: string }[]): Promise<void> {
    const byPartition = new Map<number, WebhookDelivery[]>();
    for (const { event, callId } of events) {
      const p = callId === undefined ? 0 : partitionOfShard(shardOf(callId, this.partitioning.shards), this.partitioning.partitions);
      let body: string | undefined;
      for (const endpoint of this.endpoints) {
        if (!endpoint.events.has(event.type) || this.states.isDisabled(endpoint.id)) continue;
        let list = byPartition.get(p);
        if (!list) byPartition.set(p, (list = []));
        list.push({ endpointId: endpoint.id, webhookId: webhookId(endpoint.id, event), type: event.type, body: (body ??= webhookBody(event)) });
      }
    }
    await Promise.all(
      [...byPartition].map(([p, deliveries]) => {
        const jobId = `wh.${createHash('sha256').update(deliveries.map((d) => d.webhookId).join(',')).digest('base64url').slice(0, 22)}`;
        return this.queues[p]!.add('deliver', { attempts: 0, deliveries }, { jobId });
      }),
    );
  }
}

/**
 * Relay handler: the webhook events of the relayed call changes (call.created, call.accepted,
 * call.ended), queued once the changes' events are stored. Batches run concurrently: receivers
 * deduplicate and order by the body's timestamp, and a retry reorders anyway.
 */
export function webhookHandler(publisher: WebhookPublisher): ChangeHandler {
  return {
    name: 'webhooks',
    concurrent: true,
    handle: (changes) =>
      publisher.publish(
        changes.flatMap((c) => {
          const event = callEventOf(c);
          return event ? [{ event, callId: c.call.callId }] : [];
        }),
      ),
  };
}
