import type { Queue, ConnectionOptions, DefaultJobOptions } from 'bullmq';
import type { EventPayload, MissedPayload } from '../events/payloads.js';
import type { PushTokenKind } from './kinds.js';
import { createPartitionQueues, oneRunJobOptions, type Partitioning } from '../redis/partitions.js';

/**
 * Push retries as BullMQ work (docs/architecture.md "Push"). The relay sends each push message's first attempt
 * itself, right after the events of its batch are stored; only the messages that failed with a
 * transient error go to BullMQ, as one delayed job per failed subset (and partition) carrying all
 * of its messages, and the missed-call alerts, whose first attempt waits MISSED_CALL_ALERT_GRACE_MS
 * in such a job (`attempts` 0; dispatcher.ts sendFirst). A job's attempt that fails again makes
 * one new delayed job of what is still failing, so a failed device never holds back the rest, and
 * every retry is bounded by the message's deadline.
 *
 * Queues are partitioned like the ring sweeps (`{push-<p>}`, see src/redis/partitions.ts), a
 * message going to the partition of its call's shard. Completed jobs are dropped at once and
 * failed ones kept briefly (bounded): at thousands of calls per second kept jobs would fill Redis.
 */

export const PUSH_QUEUE = 'push';

/** One push message to one device. */
export type PushMessage = (
  | { t: 'invite'; callId: string; userId: string; installationId: string; kind: PushTokenKind }
  | {
      t: 'signal';
      callId: string;
      userId: string;
      installationId: string;
      kind: 'androidPush';
      payload: EventPayload;
      /** After this the signal is pointless: its ttl and the end of its retries. */
      deadlineMs: number;
    }
  | {
      /** A missed-call alert (docs/protocol.md "Missed-call alerts"). */
      t: 'missed';
      callId: string;
      userId: string;
      installationId: string;
      kind: 'iosAlert' | 'androidPush';
      payload: MissedPayload;
      /** The end of the alert's lifetime: its apns-expiration or ttl, and the end of its retries. */
      deadlineMs: number;
    }
) & {
  /** The relayed change's trace context, when traced: each send's span joins it, retries too (docs/operations.md "Tracing"). */
  tp?: string;
};

/** A retry job: the messages that failed together, and how many attempts they have had. */
export interface PushRetryJob {
  attempts: number;
  messages: PushMessage[];
}

/** A message that fails again goes into a new job (see above). */
export const PUSH_JOB_OPTIONS: DefaultJobOptions = oneRunJobOptions(3600);

export function createPushQueues(connection: ConnectionOptions, p: Partitioning): Queue<PushRetryJob>[] {
  return createPartitionQueues(PUSH_QUEUE, connection, p, PUSH_JOB_OPTIONS);
}

/** Job IDs may not contain ':' in BullMQ; IDs here are percent-encoded. */
export function jobIdPart(s: string): string {
  return encodeURIComponent(s).replace(/\./g, '%2E');
}
