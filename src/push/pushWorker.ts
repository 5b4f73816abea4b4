import { UnrecoverableError, Worker, type ConnectionOptions, type Job } from 'bullmq';
import type { CallStore } from '../calls/store.js';
import { invitationPayload } from '../events/payloads.js';
import { tokenHash, type PushRegistry, type PushRegistration } from './registry.js';
import { PUSH_QUEUE, queueName, queuePrefix, type PushJob } from './queues.js';
import type { SendResult } from './sendResult.js';
import type { Logger } from '../util/logger.js';

/**
 * Sends push jobs. Right before each attempt it re-checks what must not ring: an invitation is
 * sent only while its call is ringing with at least a second left (spec 4.2 rule 4); retries
 * stop at the job's deadline (expiresAtMs for invitations). Provider acceptance is recorded as
 * `accepted`, never as delivered.
 */

export interface VoipSender {
  sendVoip(reg: { token: string; environment: 'production' | 'development' }, callpayload: object): Promise<SendResult>;
}
export interface AndroidSender {
  send(token: string, opts: { priority: 'HIGH' | 'NORMAL'; ttlSeconds: number; callpayload: object }): Promise<SendResult>;
}
export interface PushSenders {
  apns?: VoipSender | undefined;
  fcm?: AndroidSender | undefined;
  close?: () => Promise<void>;
}

/** Push outcomes by provider and result, for metrics and tests. */
export type PushOutcomes = Map<string, number>;

class RetryLater extends Error {
  override name = 'RetryLater';
  constructor(
    reason: string,
    readonly delayMs: number,
  ) {
    super(reason);
  }
}

/** Exponential backoff with jitter, at least the provider's retry-after. */
export function pushBackoffMs(attempt: number, retryAfterMs: number | undefined, random = Math.random): number {
  const base = Math.min(250 * 2 ** Math.max(0, attempt - 1), 8_000);
  const jittered = base / 2 + random() * (base / 2);
  return Math.max(Math.round(jittered), retryAfterMs ?? 0);
}

export interface PushWorkerDeps {
  calls: CallStore;
  registry: PushRegistry;
  senders: PushSenders;
  logger: Logger;
  outcomes: PushOutcomes;
}

export function startPushWorker(connection: ConnectionOptions, redisPrefix: string, concurrency: number, deps: PushWorkerDeps): Worker<PushJob> {
  const count = (provider: string, result: string) => {
    const k = `${provider}:${result}`;
    deps.outcomes.set(k, (deps.outcomes.get(k) ?? 0) + 1);
  };
  return new Worker<PushJob>(queueName(PUSH_QUEUE), (job) => processPush(job, deps, count), {
    connection,
    prefix: queuePrefix(redisPrefix),
    concurrency,
    settings: { backoffStrategy: (_attempts, _type, err) => (err instanceof RetryLater ? err.delayMs : 1000) },
  });
}

async function processPush(job: Job<PushJob>, deps: PushWorkerDeps, count: (p: string, r: string) => void): Promise<string> {
  const d = job.data;
  const provider = d.kind === 'iosVoip' ? 'apns' : 'fcm';
  // One round trip: both reads share the client's auto-pipeline.
  const [reg, outcome] = await Promise.all([
    deps.registry.get(d.userId, d.installationId, d.kind),
    d.t === 'invite' ? deps.calls.read(d.callId, d.userId) : undefined,
  ]);
  if (!reg) return skip('no-registration');

  let payload: object;
  let deadlineMs: number;
  const now = Date.now();
  if (d.t === 'invite') {
    if (!outcome || outcome.kind === 'failure') return skip('call-gone');
    const call = outcome.call;
    if (call.state !== 'ringing') return skip('not-ringing');
    if (call.expiresAtMs - now < 1000) return skip('expired');
    payload = invitationPayload(call, now);
    deadlineMs = call.expiresAtMs;
  } else {
    if (d.deadlineMs - now < 1000) return skip('expired');
    payload = d.payload;
    deadlineMs = d.deadlineMs;
  }

  const sentAtMs = Date.now();
  const result = await send(deps.senders, reg, d.t === 'invite' ? 'HIGH' : 'NORMAL', deadlineMs - sentAtMs, payload);
  if (result.ok) {
    count(provider, 'accepted');
    return 'accepted';
  }
  switch (result.kind) {
    case 'invalidToken': {
      count(provider, 'invalid-token');
      // Remove it unless the installation registered again (or another token) since we sent.
      const removed = await deps.registry.remove(reg.userId, reg.installationId, reg.kind, {
        tokenHash: tokenHash(reg.token),
        notAfterMs: sentAtMs,
      });
      deps.logger.info({ provider, installationId: reg.installationId, reason: result.reason, removed }, 'push token reported invalid');
      return 'invalid-token';
    }
    case 'retry': {
      count(provider, 'retry');
      const delayMs = pushBackoffMs(job.attemptsMade + 1, result.retryAfterMs);
      if (Date.now() + delayMs >= deadlineMs - 1000) {
        count(provider, 'gave-up');
        throw new UnrecoverableError(`provider unavailable (${result.reason}) until the deadline`);
      }
      throw new RetryLater(result.reason, delayMs);
    }
    case 'fatal':
      count(provider, 'rejected');
      deps.logger.warn({ provider, installationId: reg.installationId, reason: result.reason, status: result.status }, 'push rejected');
      throw new UnrecoverableError(`provider rejected the push: ${result.reason}`);
  }

  function skip(why: string): string {
    count(provider, `skipped-${why}`);
    return `skipped-${why}`;
  }
}

async function send(senders: PushSenders, reg: PushRegistration, priority: 'HIGH' | 'NORMAL', msLeft: number, payload: object): Promise<SendResult> {
  if (reg.kind === 'iosVoip') {
    if (!senders.apns) return { ok: false, kind: 'fatal', reason: 'iOS push is not configured' };
    return senders.apns.sendVoip({ token: reg.token, environment: reg.iosEnvironment ?? 'production' }, payload);
  }
  if (!senders.fcm) return { ok: false, kind: 'fatal', reason: 'Android push is not configured' };
  // Whole seconds left, never 0 (a zero-TTL message is dropped when the device is offline).
  return senders.fcm.send(reg.token, { priority, ttlSeconds: Math.max(1, Math.floor(msLeft / 1000)), callpayload: payload });
}
