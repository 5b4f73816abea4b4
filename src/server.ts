import type { Config } from './config/config.js';
import { loadUws } from './http/uws.js';
import { mountNotFound, mountRoutes, type Route } from './http/router.js';
import { ApiError } from './http/errors.js';
import { connectRedis, isRedisUnavailable, type RedisClient, type RedisTarget } from './redis/connection.js';
import { loadScripts, scriptObserver } from './redis/scripts.js';
import { createTokenVerifier } from './auth/verifier.js';
import { FailureCounter, RedisRateLimiter } from './limits/rateLimiter.js';
import { CallStore } from './calls/store.js';
import { PushRegistry } from './push/registry.js';
import type { ApiDeps } from './http/deps.js';
import { createCallRoute } from './http/endpoints/createCall.js';
import { answerCallRoute } from './http/endpoints/answerCall.js';
import { endCallRoute } from './http/endpoints/endCall.js';
import { getCallRoute } from './http/endpoints/getCall.js';
import { mediaSessionRoute } from './http/endpoints/mediaSession.js';
import { deletePushTokenRoute, putPushTokenRoute } from './http/endpoints/pushTokens.js';
import { healthRoutes } from './http/endpoints/health.js';
import type { Logger } from './util/logger.js';
import { EventLog } from './events/eventLog.js';
import { OutboxRelay } from './events/relay.js';
import type { ChangeHandler } from './events/change.js';
import { callEventsRoute } from './http/endpoints/callEvents.js';
import { Gateway } from './gateway/gateway.js';
import { createPushQueues } from './push/queues.js';
import { pushHandler } from './push/relayPushes.js';
import { PushDispatcher, type PushOutcomes, type PushSenders } from './push/dispatcher.js';
import { startPushRetryWorkers } from './push/pushWorker.js';
import { RingSweeper } from './timers/ringSweeper.js';
import { renameCallRoute } from './http/endpoints/renameCall.js';
import { readMessagesRoute, sendMessageRoute } from './http/endpoints/callMessages.js';
import { createPushSenders } from './push/providers.js';
import { openApiDocument } from './http/openapi.js';
import { Metrics } from './observability/metrics.js';
import { keys } from './redis/keys.js';
import { DEMO_DIR, demoRoutes } from './demo/demoRoutes.js';

export interface StartOptions {
  /**
   * The dev signing secret, when the process runs in dev mode (`--dev`): with DEMO=true the
   * softphone can then get tokens from /demo-api/token. Never set in production.
   */
  devTokenSecret?: string | undefined;
}

export interface RunningServer {
  port: number;
  redis: RedisClient;
  gateway: Gateway | undefined;
  relay: OutboxRelay | undefined;
  pushOutcomes: PushOutcomes;
  close(): Promise<void>;
}

export function apiRoutes(deps: ApiDeps): Route[] {
  return [
    callEventsRoute(deps),
    createCallRoute(deps),
    getCallRoute(deps),
    answerCallRoute(deps),
    endCallRoute(deps),
    renameCallRoute(deps),
    sendMessageRoute(deps),
    readMessagesRoute(deps),
    mediaSessionRoute(deps),
    putPushTokenRoute(deps),
    deletePushTokenRoute(deps),
  ];
}

/** Starts the roles named in config.ROLES on one uWS app and one set of Redis connections. */
export async function startServer(
  config: Config,
  redisTarget: RedisTarget,
  logger: Logger,
  extraHandlers: readonly ChangeHandler[] = [],
  options: StartOptions = {},
): Promise<RunningServer> {
  const uWS = loadUws(config.ALLOW_UWS_FALLBACK);
  const redis = connectRedis(redisTarget, 'commands', 'calling-backend', config.REDIS_COMMAND_TIMEOUT_MS);
  await redis.connect();
  await loadScripts(redis);

  const ks = { prefix: config.REDIS_PREFIX, shards: config.CALL_SHARDS };
  const deps: ApiDeps = {
    config,
    calls: new CallStore(redis, {
      ...ks,
      ringTimeoutMs: config.RING_TIMEOUT_MS,
      retentionMs: config.CALL_RETENTION_MS,
      operationTtlMs: config.IDEMPOTENCY_TTL_MS,
      callWaiting: config.CALL_WAITING,
      maxRenamesPerCall: config.RENAMES_PER_CALL,
    }),
    auth: {
      verify: createTokenVerifier({
        secret: config.AUTH_JWT_SECRET,
        publicKeyPem: config.AUTH_JWT_PUBLIC_KEY,
        jwksUrl: config.AUTH_JWKS_URL,
        issuer: config.AUTH_ISSUER,
        audience: config.AUTH_AUDIENCE,
      }),
      failures: config.RATE_AUTH_FAILURES_PER_MIN > 0 ? new FailureCounter({ limit: config.RATE_AUTH_FAILURES_PER_MIN, windowMs: 60_000 }) : undefined,
    },
    limits: {
      callCreates:
        config.RATE_CALL_CREATES_PER_MIN > 0 ? new RedisRateLimiter(redis, { limit: config.RATE_CALL_CREATES_PER_MIN, windowMs: 60_000 }) : undefined,
      callMessages:
        config.RATE_CALL_MESSAGES_PER_10S > 0 ? new RedisRateLimiter(redis, { limit: config.RATE_CALL_MESSAGES_PER_10S, windowMs: 10_000 }) : undefined,
      renames: config.RATE_RENAMES_PER_MIN > 0 ? new RedisRateLimiter(redis, { limit: config.RATE_RENAMES_PER_MIN, windowMs: 60_000 }) : undefined,
      pushTokenWrites:
        config.RATE_PUSH_TOKEN_WRITES_PER_HOUR > 0
          ? new RedisRateLimiter(redis, { limit: config.RATE_PUSH_TOKEN_WRITES_PER_HOUR, windowMs: 3_600_000 })
          : undefined,
    },
    pushRegistry: new PushRegistry(redis, ks),
    eventLog: new EventLog(redis, {
      ...ks,
      maxLen: config.EVENT_LOG_MAX_LEN,
      maxAgeMs: config.EVENT_LOG_MAX_AGE_MS,
      // The epoch outlives the entries, so an old cursor reports `trimmed` rather than `reset`.
      metaTtlMs: config.EVENT_LOG_MAX_AGE_MS * 7,
    }),
  };
  const closers: (() => Promise<void>)[] = [];

  let accepting = true;
  const app = uWS.App();
  const metrics = new Metrics();
  scriptObserver.observe = (script, seconds) => metrics.scriptDuration.observe({ script }, seconds);
  const openApiText = JSON.stringify(openApiDocument());
  const routes: Route[] = [
    ...healthRoutes({
      accepting: () => accepting,
      // Answers within a second whatever REDIS_COMMAND_TIMEOUT_MS says: a stalled Redis is not ready.
      redisReady: () => Promise.race([redis.ping().then((r) => r === 'PONG'), sleep(900).then(() => false)]),
    }),
    { method: 'get', pattern: '/v1/openapi.json', handler: () => ({ status: 200, body: openApiText }) },
    {
      method: 'get',
      pattern: '/metrics',
      handler: async () => ({ status: 200, body: await metrics.text(), contentType: metrics.registry.contentType }),
    },
  ];
  if (config.ROLES.includes('api')) routes.push(...apiRoutes(deps));
  if (config.DEMO && config.ROLES.includes('api')) {
    routes.push(...demoRoutes({ dir: DEMO_DIR, devTokenSecret: options.devTokenSecret }));
    logger.info({ devTokens: options.devTokenSecret !== undefined }, 'serving the browser softphone at /demo/');
  }

  let gateway: Gateway | undefined;
  if (config.ROLES.includes('gateway')) {
    const subscriber = connectRedis(redisTarget, 'subscriber', 'calling-backend');
    await subscriber.connect();
    gateway = new Gateway(subscriber, deps.eventLog, deps.auth, logger, {
      ...ks,
      messagesPer10s: config.RATE_WS_MESSAGES_PER_10S,
      maxSocketsPerUser: config.WS_MAX_SOCKETS_PER_USER,
      clientIpHeader: config.CLIENT_IP_HEADER,
      idleTimeoutS: config.WS_IDLE_TIMEOUT_S,
      maxMessageBytes: config.WS_MAX_MESSAGE_BYTES,
      maxBackpressureBytes: config.WS_MAX_BACKPRESSURE_BYTES,
      readBatch: 200,
    }, { calls: deps.calls, limiter: deps.limits.callMessages });
    gateway.mount(app);
    gateway.startSweeps();
    const g = gateway;
    metrics.gauge('ws_open_sockets', 'Open signaling WebSockets', () => g.openSockets());
    metrics.countersFrom('ws_events_sent_total', 'Events sent over signaling', [], () => [[[], g.stats.eventsSent]]);
    metrics.countersFrom('ws_messages_sent_total', 'In-call messages sent over signaling', [], () => [[[], g.stats.messagesSent]]);
    metrics.countersFrom('ws_rate_limited_total', 'Sockets closed for too many client messages (4029)', [], () => [[[], g.stats.rateLimited]]);
    metrics.countersFrom('ws_slow_consumers_closed_total', 'Sockets closed as slow consumers (4008)', [], () => [[[], g.stats.slowConsumersClosed]]);
    closers.push(async () => {
      gateway?.closeAll();
      subscriber.disconnect();
    });
  }

  let relay: OutboxRelay | undefined;
  const pushOutcomes: PushOutcomes = new Map();
  if (config.ROLES.includes('worker')) {
    // BullMQ needs connections that retry for ever (maxRetriesPerRequest: null).
    const queueConnection = connectRedis(redisTarget, 'queues', 'calling-backend-queues');
    const partitioning = { ...ks, partitions: Math.min(config.QUEUE_PARTITIONS, config.CALL_SHARDS) };
    const retryQueues = createPushQueues(queueConnection, partitioning);
    const senders: PushSenders = createPushSenders(config, logger);
    const enabled = { iosVoip: senders.apns !== undefined, androidPush: senders.fcm !== undefined };
    await warnOnCoarseRedisHz(redis, logger);
    const peekCall = (callId: string) => deps.calls.peek(callId);
    const dispatcher = new PushDispatcher({
      registry: deps.pushRegistry,
      peekCall,
      senders,
      retryQueues,
      partitioning,
      logger,
      outcomes: pushOutcomes,
    });
    const retryWorkers = startPushRetryWorkers(queueConnection, partitioning, config.PUSH_CONCURRENCY, dispatcher, logger);
    const sweeper = await RingSweeper.start(
      redis,
      queueConnection,
      { ...partitioning, retentionMs: config.CALL_RETENTION_MS, pageSize: 500, tickMs: config.RING_SWEEP_TICK_MS, slotMs: 1000 },
      logger,
      (r) => {
        for (const ms of r.lateMs) metrics.ringSweepLateness.observe(ms / 1000);
      },
    );
    metrics.countersFrom('push_outcomes_total', 'Push attempts by provider and result (accepted = accepted for delivery)', ['provider', 'result'], () =>
      [...pushOutcomes].map(([k, v]) => [k.split(':'), v]),
    );
    metrics.gauge('queue_push_waiting', 'Push retry jobs waiting or delayed (all partitions)', async () => {
      const counts = await Promise.all(retryQueues.map((q) => q.getJobCounts('waiting', 'delayed', 'active', 'prioritized')));
      return counts.reduce((sum, c) => sum + Object.values(c).reduce((a, b) => a + b, 0), 0);
    });
    metrics.gauge('ringing_calls', 'Calls ringing now (in the shards\' ring indexes, all shards)', async () => {
      const counts = await Promise.all(Array.from({ length: ks.shards }, (_, i) => redis.zcard(keys.ringingForShard(ks, i))));
      return counts.reduce((a, b) => a + b, 0);
    });
    const handlers: ChangeHandler[] = [
      pushHandler(deps.pushRegistry, peekCall, dispatcher, enabled) as ChangeHandler,
      ...extraHandlers,
    ];
    const blockingConnections = new Set<RedisClient>();
    relay = new OutboxRelay(
      redis,
      async () => {
        const c = connectRedis(redisTarget, 'blocking', 'calling-backend-relay');
        await c.connect();
        blockingConnections.add(c);
        c.once('end', () => blockingConnections.delete(c));
        return c;
      },
      deps.eventLog,
      handlers,
      logger,
      { ...ks, batchSize: config.RELAY_BATCH_SIZE, blockMs: 1000, leaseMs: config.RELAY_CLAIM_IDLE_MS },
    );
    await relay.start();
    const r = relay;
    metrics.countersFrom('relay_changes_total', 'Call changes relayed from the outbox', [], () => [[[], r.relayed]]);
    // The relay feeds the queues: stop it first, then let the workers finish their active jobs.
    closers.push(async () => {
      await r.stop();
      for (const c of blockingConnections) c.disconnect();
      await Promise.all([sweeper.close(), ...retryWorkers.map((w) => w.close())]);
      await Promise.all(retryQueues.map((q) => q.close()));
      await senders.close?.();
      queueConnection.disconnect();
    });
  }
  metrics.gauge('outbox_pending_entries', 'Outbox entries not yet relayed (all shards)', async () => {
    // One auto-pipelined round trip (per primary on a cluster: the shards live in different slots).
    const lengths = await Promise.all(Array.from({ length: ks.shards }, (_, i) => redis.xlen(keys.outboxForShard(ks, i))));
    return lengths.reduce((sum, n) => sum + n, 0);
  });
  const inFlight = { count: 0 };
  mountRoutes(app, routes, {
    bodyLimitBytes: config.BODY_LIMIT_BYTES,
    clientIpHeader: config.CLIENT_IP_HEADER,
    inFlight,
    onResponse: (ctx, route, status, startedAt) => {
      const method = ctx.method.toUpperCase();
      metrics.httpRequests.inc({ route, method, status: String(status) });
      const seconds = (performance.now() - startedAt) / 1000;
      metrics.httpDuration.observe({ route, method }, seconds);
      // One line per request at debug; server-side failures also at warn. Never headers or bodies.
      const line = { requestId: ctx.requestId, method, route, status, ms: Math.round(seconds * 1e4) / 10 };
      if (status >= 500) logger.warn(line, 'request failed');
      else logger.debug(line, 'request');
    },
    onError: (err, ctx) => logger.error({ err, requestId: ctx.requestId, path: ctx.path }, 'request failed'),
    classifyError: (err) =>
      isRedisUnavailable(err) ? new ApiError('unavailable', 'the call store is unreachable; retry later', {}, { 'retry-after': '1' }) : undefined,
  });
  mountNotFound(app);

  const listenSocket = await new Promise<unknown>((res, rej) => {
    app.listen(config.HOST, config.PORT, (sock) => (sock ? res(sock) : rej(new Error(`cannot listen on ${config.HOST}:${config.PORT}`))));
  });
  const port = uWS.us_socket_local_port(listenSocket as never);
  logger.info({ port, roles: config.ROLES }, 'listening');

  return {
    port,
    redis,
    gateway,
    relay,
    pushOutcomes,
    /**
     * Graceful shutdown: not ready, stop accepting connections, let in-flight requests finish,
     * close sockets with 1001 (reconnect with your cursor), stop the relay and let the queue
     * workers finish their active jobs, then drop idle keep-alive connections and quit Redis.
     * The caller bounds the whole with SHUTDOWN_TIMEOUT_MS.
     */
    async close() {
      accepting = false;
      uWS.us_listen_socket_close(listenSocket as never);
      while (inFlight.count > 0) await new Promise((r) => setTimeout(r, 10));
      for (const close of closers) await close();
      // Requests that came in on kept-alive connections meanwhile are answered too; closing the
      // app in the same tick as this check cuts off none whose handler already started.
      while (inFlight.count > 0) await new Promise((r) => setTimeout(r, 10));
      (app as unknown as { close?: () => void }).close?.();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/**
 * BullMQ's workers wait for delayed jobs (ring sweep slots, push retries) in a blocking read whose
 * timeout Redis only notices `hz` times a second: with Redis's default hz 10 they start up to
 * 100 ms late. Said once at start (README "Redis settings").
 */
async function warnOnCoarseRedisHz(redis: RedisClient, logger: Logger): Promise<void> {
  const info = await redis.info('server').catch(() => '');
  const hz = Number(/^hz:(\d+)/m.exec(info)?.[1] ?? NaN);
  if (hz < 50) {
    logger.warn({ hz }, `Redis runs with hz ${hz}: ring sweeps and push retries may start up to ${Math.round(1000 / hz)} ms late; run Redis with hz 100`);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}
