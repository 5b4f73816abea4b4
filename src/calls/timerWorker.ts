import { DelayedError, Worker, type ConnectionOptions } from 'bullmq';
import type { CallStore } from './store.js';
import { TIMER_QUEUE, queueName, queuePrefix, type TimerJob } from '../push/queues.js';

/**
 * The ring timer: at expiresAtMs a still-ringing call ends as `unanswered` (expireCall.lua,
 * whose outbox entry tells both sides and sends the Android signals). A timer that fires early
 * (clock skew between this host and Redis) is put back until the call is due.
 */
export function startTimerWorker(connection: ConnectionOptions, redisPrefix: string, concurrency: number, calls: CallStore): Worker<TimerJob> {
  return new Worker<TimerJob>(
    queueName(TIMER_QUEUE),
    async (job, token) => {
      const result = await calls.expire(job.data.callId);
      if (result.kind === 'early') {
        await job.moveToDelayed(Date.now() + result.msLeft, token);
        throw new DelayedError();
      }
      return result.kind;
    },
    { connection, prefix: queuePrefix(redisPrefix), concurrency },
  );
}
