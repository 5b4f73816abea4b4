import { createHash } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { ChangeHandler } from '../calls/change.js';
import { shardOf } from '../redis/keys.js';
import { partitionOfShard, type Partitioning } from '../redis/partitions.js';
import type { WebhookEndpoint } from './endpoints.js';
import type { EndpointStates } from './endpointStates.js';
import { callEventsOf, webhookBody, webhookId, type WebhookEvent } from './events.js';
import type { WebhookDelivery, WebhookJob } from './queue.js';
import type { TokenRemoval } from '../push/registry.js';

/**
 * How long deliveries wait to share a job with those of other relay batches, and how many make a
 * job full. A job is BullMQ work of its own: 44 Redis commands to add, take and finish it
 * (docs/performance.md "Command budget"), more than a lifecycle's own at a moderate rate if every
 * relay batch had one. 50 ms makes at most 20 jobs a second per partition; the relay acknowledges
 * a batch once its job is queued, so its batches wait that long for their acknowledgement (never
 * for their events: those are stored and sent first).
 */
const COALESCE_MS = 50;
const COALESCE_MAX = 200;

/**
 * Turns webhook events into delivery jobs (docs/webhooks.md "Delivery"): one delivery per event and
 * endpoint that wants its type and is not disabled, gathered per partition for COALESCE_MS into
 * one job. `publish` resolves once the job holding its deliveries is in the queue, so the relay
 * acknowledges a change only after its webhooks are queued. A job's ID is derived from its
 * deliveries' webhook-ids, so adding the same job again adds nothing (and a receiver deduplicates
 * by webhook-id anyway).
 */
export class WebhookPublisher {
  /** Per partition: deliveries gathered for the next job, and who waits for it. */
  private readonly pending = new Map<number, { deliveries: WebhookDelivery[]; flushed: Promise<void>; flush: () => void }>();

  constructor(
    private readonly endpoints: readonly WebhookEndpoint[],
    private readonly queues: readonly Queue<WebhookJob>[],
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

  /** The partition's job being gathered (a new one, flushed in COALESCE_MS, when none is). */
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
        const jobId = `wh.${createHash('sha256').update(deliveries.map((d) => d.webhookId).join(',')).digest('base64url').slice(0, 22)}`;
        this.queues[p]!.add('deliver', { attempts: 0, deliveries }, { jobId }).then(() => resolve(), reject);
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
 * call.ended, call.participant), queued once the changes' events are stored. Batches run concurrently: receivers
 * deduplicate and order by the body's timestamp, and a retry reorders anyway.
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
