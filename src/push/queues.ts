import { Queue, type ConnectionOptions, type DefaultJobOptions } from 'bullmq';
import type { EventPayload } from '../events/payloads.js';
import type { PushTokenKind } from '../http/schemas.js';

/**
 * The BullMQ queues and every setting that matters at high call rates (README "Queues").
 *
 * push:   one job per device message. Added in bulk by the relay. Deduplicated by a
 *         deterministic ID for a minute, so a relay that retries a batch does not send twice.
 *         Completed jobs are dropped at once and failed ones kept briefly (bounded), because
 *         at thousands of calls per second kept jobs would fill Redis.
 * timers: one delayed job per call at its expiresAtMs, ID'd by callId (so at most one per
 *         call), removed when the call stops ringing first; one that fires anyway is harmless
 *         (expireCall.lua then does nothing).
 */

export const PUSH_QUEUE = 'push';
export const TIMER_QUEUE = 'timers';

/** Queue key prefix: one hash tag per queue keeps BullMQ's scripts Redis Cluster safe. */
export function queuePrefix(redisPrefix: string): string {
  return `${redisPrefix}:q`;
}
export function queueName(name: string): string {
  return `{${name}}`;
}

export type PushJob =
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
    };

export interface TimerJob {
  callId: string;
}

export const PUSH_JOB_OPTIONS: DefaultJobOptions = {
  // Retries are bounded by each job's deadline (the ring window), checked before each attempt.
  attempts: 12,
  backoff: { type: 'push' },
  removeOnComplete: true,
  removeOnFail: { age: 3600, count: 1000 },
};

export const TIMER_JOB_OPTIONS: DefaultJobOptions = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 200 },
  removeOnComplete: true,
  removeOnFail: { age: 24 * 3600, count: 1000 },
};

/** BullMQ's own events stream is not used here: keep it tiny. */
const STREAMS = { events: { maxLen: 100 } };

export function createQueues(connection: ConnectionOptions, redisPrefix: string) {
  const prefix = queuePrefix(redisPrefix);
  return {
    push: new Queue<PushJob>(queueName(PUSH_QUEUE), { connection, prefix, defaultJobOptions: PUSH_JOB_OPTIONS, streams: STREAMS }),
    timers: new Queue<TimerJob>(queueName(TIMER_QUEUE), { connection, prefix, defaultJobOptions: TIMER_JOB_OPTIONS, streams: STREAMS }),
  };
}
export type Queues = ReturnType<typeof createQueues>;

/** Job IDs may not contain ':' in BullMQ; IDs here are percent-encoded. */
export function jobIdPart(s: string): string {
  return encodeURIComponent(s).replace(/\./g, '%2E');
}
