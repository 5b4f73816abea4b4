import type { ChangeHandler } from '../calls/change.js';
import type { RedisClient } from '../redis/connection.js';
import { keys, shardOf } from '../redis/keys.js';
import { partitionOfShard, type Partitioning } from '../redis/partitions.js';
import type { WebhookEndpoint } from './endpoints.js';
import type { EndpointStates } from './endpointStates.js';
import { callEventsOf, webhookBody, webhookId, type WebhookEvent } from './events.js';
import type { WebhookDelivery } from './queue.js';
import type { TokenRemoval } from '../push/registry.js';

/**
 * How long deliveries wait to share a stream entry with those of other relay batches, and how
 * many make an entry full. An entry costs Redis its add, its read and a share of an
 * acknowledgement (src/webhooks/streamReader.ts): at a rate, one entry per 50 ms and partition
 * makes that a fraction of a command per lifecycle (docs/performance.md "Command budget"). The
 * relay acknowledges a batch once its entry is added, so its batches wait that long for their
 * acknowledgement (never for their events: those are stored and sent first).
 */
const COALESCE_MS = 50;
const COALESCE_MAX = 200;

/**
 * Turns webhook events into deliveries (docs/webhooks.md "Delivery"): one per event and endpoint
 * that wants its type and is not disabled, gathered per partition for COALESCE_MS into one entry
 * of the partition's webhook stream, which the workers read and send (streamReader.ts).
 * `publish` resolves once the entry holding its deliveries is added, so the relay acknowledges a
 * change only after its webhooks are stored. A batch handed over again adds its deliveries again,
 * with the same webhook-ids: receivers deduplicate by them.
 */
export class WebhookPublisher {
  /** Per partition: deliveries gathered for the next stream entry, and who waits for it. */
  private readonly pending = new Map<number, { deliveries: WebhookDelivery[]; flushed: Promise<void>; flush: () => void }>();

  constructor(
    private readonly endpoints: readonly WebhookEndpoint[],
    private readonly redis: RedisClient,
    private readonly partitioning: Partitioning,
    private readonly states: EndpointStates,
  ) {}

  /** Queues the events; `callId` (when about a call) picks the partition, as for its pushes. */
  async publish(events: readonly { event: WebhookEvent; callId?: string; tokenRemoval?: TokenRemoval }[]): Promise<void> {
    const waits = new Set<Promise<void>>();
    for (const { event, callId, tokenRemoval } of events) {
      const p = callId === undefined ? 0 : partitionOfShard(shardOf(callId, this.partitioning.shards), this.partitioning.partitions);
      let body: string | undefined;
      for (const endpoint of this.endpoints) {
        if (!endpoint.events.has(event.type) || this.states.isDisabled(endpoint.id)) continue;
        const batch = this.gather(p);
        batch.deliveries.push({ endpointId: endpoint.id, webhookId: webhookId(endpoint.id, event), type: event.type, body: (body ??= webhookBody(event)), ...(tokenRemoval ? { tokenRemoval } : {}) });
        waits.add(batch.flushed);
        if (batch.deliveries.length >= COALESCE_MAX) batch.flush();
      }
    }
    await Promise.all(waits);
  }

  /** The partition's entry being gathered (a new one, added in COALESCE_MS, when none is). */
  private gather(p: number): { deliveries: WebhookDelivery[]; flushed: Promise<void>; flush: () => void } {
    const open = this.pending.get(p);
    if (open) return open;
    const deliveries: WebhookDelivery[] = [];
    let flush!: () => void;
    const flushed = new Promise<void>((resolve, reject) => {
      flush = () => {
        if (this.pending.get(p)?.deliveries !== deliveries) return;
        this.pending.delete(p);
        clearTimeout(timer);
        this.redis.xadd(keys.webhookStream(this.partitioning, p), '*', 'd', JSON.stringify(deliveries)).then(() => resolve(), reject);
      };
    });
    // Each waiter sees the failure through its own await; none goes unhandled meanwhile.
    flushed.catch(() => {});
    const timer = setTimeout(() => flush(), COALESCE_MS);
    const batch = { deliveries, flushed, flush };
    this.pending.set(p, batch);
    return batch;
  }
}

/**
 * Relay handler: the webhook events of the relayed call changes (call.created, call.accepted,
 * call.ended, call.participant), added to the webhook stream once the changes' events are stored.
 * Batches run concurrently: receivers deduplicate and order by the body's timestamp, and a retry
 * reorders anyway.
 */
export function webhookHandler(publisher: WebhookPublisher): ChangeHandler {
  return {
    name: 'webhooks',
    concurrent: true,
    handle: (changes) =>
      publisher.publish(
        changes.flatMap((c) => callEventsOf(c).map((event) => ({ event, callId: c.call.callId }))),
      ),
  };
}
