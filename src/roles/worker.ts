import { queuePartitions } from '../config/config.js';
import { pushApps } from '../config/pushApps.js';
import { connectRedis, type RedisClient } from '../redis/connection.js';
import { keys } from '../redis/keys.js';
import type { ChangeHandler } from '../calls/change.js';
import { OutboxRelay } from '../events/relay.js';
import { callChangeObserver } from '../events/changeObserver.js';
import { expireUntouchedRegistrations, migrateLegacyRegistrations } from '../push/legacyRegistrations.js';
import { createPushQueues } from '../push/queues.js';
import { pushHandler } from '../push/relayPushes.js';
import { PushDispatcher, type PushOutcomes, type PushSenders } from '../push/dispatcher.js';
import { startPushRetryWorkers } from '../push/pushWorker.js';
import { alertsOf, createPushSenders, enabledKinds } from '../push/providers.js';
import { missedCallClaims } from '../push/missedCallClaims.js';
import { RingSweeper } from '../timers/ringSweeper.js';
import { startWebhooks } from '../webhooks/webhookWorkers.js';
import type { Logger } from '../util/logger.js';
import { roomKeeper } from '../media/roomKeeper.js';
import { keepsRooms } from '../media/sfu.js';
import { daysMs, type RoleContext, type StartedRole } from './context.js';

/** The worker role: the outbox relays, the pushes and the ring sweeps (docs/architecture.md). */

/** The worker: outbox relays, first push attempts and retries, ring sweeps. */
export async function startWorker(
  ctx: RoleContext,
  extraHandlers: readonly ChangeHandler[],
): Promise<StartedRole & { relay: OutboxRelay; pushOutcomes: PushOutcomes }> {
  const { config, redis, deps, ks, metrics, logger } = ctx;
  // BullMQ needs connections that retry for ever (maxRetriesPerRequest: null).
  const queueConnection = connectRedis(ctx.redisTarget, 'queues', 'calling-backend-queues');
  const partitioning = { ...ks, partitions: queuePartitions(config) };
  const retryQueues = createPushQueues(queueConnection, partitioning);
  const senders: PushSenders = createPushSenders(config, pushApps(config), logger);
  const enabled = enabledKinds(senders);
  await warnOnCoarseRedisHz(redis, logger);
  // Version 0.1.0's push registrations move to their new form, once, beside the running service
  // (docs/operations.md "Upgrading").
  // Then what was written before idle expiry gets its TTL (docs/keyspace.md "Push registrations").
  migrateLegacyRegistrations(redis, ks, deps.pushRegistry)
    .then(
      (r) => r !== 'already done' && r.moved > 0 && logger.info({ moved: r.moved }, 'moved the push registrations of version 0.1.0'),
      (err: unknown) => logger.warn({ err: (err as Error).message }, 'moving the push registrations of version 0.1.0 failed; the next start tries again'),
    )
    .then(() => expireUntouchedRegistrations(redis, ks, deps.pushRegistry))
    .then(
      (r) => r !== 'already done' && logger.info(r, 'gave the push registrations written before idle expiry their TTL'),
      (err: unknown) => logger.warn({ err: (err as Error).message }, 'giving the push registrations written before idle expiry their TTL failed; the next start tries again'),
    );
  const pushOutcomes: PushOutcomes = new Map();
  // Connections for blocking reads: one per relay shard and per webhook stream partition.
  const blockingConnections = new Set<RedisClient>();
  const blockingConnection = async (name: string): Promise<RedisClient> => {
    const c = connectRedis(ctx.redisTarget, 'blocking', name);
    await c.connect();
    blockingConnections.add(c);
    c.once('end', () => blockingConnections.delete(c));
    return c;
  };
  const webhooks = await startWebhooks(deps.webhooks, {
    redis,
    connection: queueConnection,
    blockingConnection: () => blockingConnection('calling-backend-webhooks'),
    partitioning,
    config,
    metrics,
    logger,
    registry: deps.pushRegistry,
  });
  const dispatcher = new PushDispatcher({
    registry: deps.pushRegistry,
    peekCall: (callId) => deps.calls.peek(callId),
    senders,
    retryQueues,
    partitioning,
    logger,
    outcomes: pushOutcomes,
    observeSend: (provider, result, seconds) => metrics.pushDuration.observe({ provider, result }, seconds),
    observeMisconfigured: (provider, app, reason) => metrics.pushConfigurationErrors.inc({ provider, app, reason }),
    tokenRemoved: webhooks.tokenRemoved,
    claimAlerts: missedCallClaims(redis, ks),
    alertMarks: (msgs) => deps.missedCallSeen.marks(msgs),
    alertGraceMs: config.MISSED_CALL_ALERT_GRACE_MS,
    alertSent: (m) => deps.history.alerts.noteSent(m.userId, m.callId, m.payload.occurredAtMs),
    observeMissed: (platform, result) => metrics.missedCallPushes.inc({ platform, result }),
  });
  const retryWorkers = startPushRetryWorkers(queueConnection, partitioning, config.PUSH_CONCURRENCY, dispatcher, logger);
  const sweeper = await RingSweeper.start(
    redis,
    queueConnection,
    { ...partitioning, retentionMs: config.CALL_RETENTION_MS, pageSize: 500, tickMs: config.RING_SWEEP_TICK_MS, slotMs: 1000, ringTimeoutMs: config.RING_TIMEOUT_MS },
    logger,
    (r) => {
      for (const ms of r.lateMs) metrics.ringSweepLateness.observe(ms / 1000);
    },
  );
  metrics.countersFrom('push_outcomes_total', 'Push attempts by provider and result (accepted = accepted for delivery)', ['provider', 'result'], () =>
    [...pushOutcomes].map(([k, v]) => [k.split(':'), v]),
  );
  metrics.gauge('queue_push_waiting', 'Push retry jobs, and missed-call alerts in their grace, waiting or delayed (all partitions)', async () => {
    const counts = await Promise.all(retryQueues.map((q) => q.getJobCounts('waiting', 'delayed', 'active', 'prioritized')));
    return counts.reduce((sum, c) => sum + Object.values(c).reduce((a, b) => a + b, 0), 0);
  });
  metrics.gauge('ringing_calls', "Calls ringing now (in the shards' ring indexes, all shards)", async () => {
    const counts = await Promise.all(Array.from({ length: ks.shards }, (_, i) => redis.zcard(keys.ringingForShard(ks, i))));
    return counts.reduce((a, b) => a + b, 0);
  });
  const sfu = deps.media.sfu;
  const handlers: ChangeHandler[] = [
    callChangeObserver(metrics, logger),
    pushHandler(dispatcher, enabled, { ringTimeoutMs: config.RING_TIMEOUT_MS, alertsOf: alertsOf(senders) }),
    ...webhooks.handlers,
    // The SFU's rooms follow the calls (docs/operations.md "SFU media"), where the SFU has rooms to
    // keep: group calls use a configured SFU whatever MEDIA_MODE says.
    ...(keepsRooms(sfu) ? [roomKeeper(sfu, deps.media.mode, logger)] : []),
    ...extraHandlers,
  ];
  const relay = new OutboxRelay(
    redis,
    () => blockingConnection('calling-backend-relay'),
    deps.eventLog,
    handlers,
    logger,
    { ...ks, historyRetentionMs: daysMs(config.CALL_RECORD_RETENTION_DAYS), batchSize: config.RELAY_BATCH_SIZE, gatherMs: config.RELAY_GATHER_MS, blockMs: 1000, leaseMs: config.RELAY_CLAIM_IDLE_MS },
  );
  await relay.start();
  metrics.countersFrom('relay_changes_total', 'Call changes relayed from the outbox', [], () => [[[], relay.relayed]]);
  return {
    relay,
    pushOutcomes,
    // The relay feeds the queues: stop it first, then let the workers finish their active jobs.
    async close() {
      await relay.stop();
      await Promise.all([sweeper.close(), ...retryWorkers.map((w) => w.close()), webhooks.close()]);
      for (const c of blockingConnections) c.disconnect();
      await Promise.all(retryQueues.map((q) => q.close()));
      await senders.close?.();
      queueConnection.disconnect();
    },
  };
}

/**
 * BullMQ's workers wait for delayed jobs (ring sweep slots, push retries) in a blocking read whose
 * timeout Redis only notices `hz` times a second: with Redis's default hz 10 they start up to
 * 100 ms late. Said once at start (docs/operations.md "Operations").
 */
async function warnOnCoarseRedisHz(redis: RedisClient, logger: Logger): Promise<void> {
  const info = await redis.info('server').catch(() => '');
  const hz = Number(/^hz:(\d+)/m.exec(info)?.[1] ?? NaN);
  if (hz < 50) {
    logger.warn({ hz }, `Redis runs with hz ${hz}: ring sweeps and push retries may start up to ${Math.round(1000 / hz)} ms late; run Redis with hz 100`);
  }
}

