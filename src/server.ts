import { pushApps, queuePartitions, type Config } from './config/config.js';
import { loadUws, type Uws } from './transport/uws.js';
import { mountNotFound, mountRoutes, type Route } from './http/router.js';
import { ApiError, unavailableError } from './commands/errors.js';
import { connectRedis, type RedisClient, type RedisTarget } from './redis/connection.js';
import { loadScripts, observeScripts } from './redis/scripts.js';
import { createTokenVerifier } from './auth/verifier.js';
import { FailureCounter, RedisRateLimiter } from './limits/rateLimiter.js';
import { CallStore } from './calls/store.js';
import { PushRegistry } from './push/registry.js';
import type { ApiDeps } from './http/deps.js';
import { createCallRoute } from './http/endpoints/createCall.js';
import { getCallRoute } from './http/endpoints/getCall.js';
import { mediaSessionRoute } from './http/endpoints/mediaSession.js';
import { deletePushTokenRoute, putPushTokenRoute } from './http/endpoints/pushTokens.js';
import { healthRoutes } from './http/endpoints/health.js';
import type { Logger } from './util/logger.js';
import { EventLog } from './events/eventLog.js';
import { OutboxRelay } from './events/relay.js';
import type { ChangeHandler } from './calls/change.js';
import { expireUntouchedRegistrations, migrateLegacyRegistrations } from './push/legacyRegistrations.js';
import { callEventsRoute } from './http/endpoints/callEvents.js';
import { Gateway } from './gateway/gateway.js';
import { createPushQueues } from './push/queues.js';
import { pushHandler } from './push/relayPushes.js';
import { PushDispatcher, type PushOutcomes, type PushSenders } from './push/dispatcher.js';
import { startPushRetryWorkers } from './push/pushWorker.js';
import { RingSweeper } from './timers/ringSweeper.js';
import { readMessagesRoute } from './http/endpoints/callMessages.js';
import { CALL_COMMANDS } from './commands/callCommands.js';
import { commandRoute } from './http/endpoints/callRoute.js';
import { createPushSenders, enabledKinds, registrableApps } from './push/providers.js';
import { openApiDocument } from './contracts/openapi.js';
import { Metrics } from './observability/metrics.js';
import { startMetricsServer } from './observability/metricsServer.js';
import { callChangeObserver } from './events/changeObserver.js';
import { inSpan, SpanKind, tracingEnabled } from './observability/tracing.js';
import { keys } from './redis/keys.js';
import { DEMO_DIR, demoRoutes } from './demo/demoRoutes.js';
import { CallHistory } from './history/callHistory.js';
import { DAY_MS } from './calls/retention.js';
import { callHistoryRoute } from './http/endpoints/callHistory.js';
import { webhookEndpoints } from './webhooks/endpoints.js';
import { EndpointStates } from './webhooks/endpointStates.js';
import { DeadLetters } from './webhooks/deadLetters.js';
import { createWebhookQueues } from './webhooks/queue.js';
import { startWebhooks } from './webhooks/webhookWorkers.js';
import { replayDeadLetter } from './webhooks/deadLetters.js';
import { ServerKeys } from './auth/serverKeys.js';
import { UserAdmin } from './users/userAdmin.js';
import type { ServerAuth } from './http/endpoints/server/serverRoute.js';
import { serverCallRoutes } from './http/endpoints/server/serverCalls.js';
import { serverUserRoutes } from './http/endpoints/server/serverUsers.js';
import { serverWebhookRoutes } from './http/endpoints/server/serverWebhooks.js';

export interface StartOptions {
  /**
   * The dev signing secret, when the process runs in dev mode (`--dev`): with DEMO=true the
   * softphone can then get tokens from /demo-api/token. Never set in production.
   */
  devTokenSecret?: string | undefined;
}

export interface RunningServer {
  port: number;
  /** The metrics listener's port (METRICS_PORT; docs/operations.md "Observability"). */
  metricsPort: number;
  redis: RedisClient;
  gateway: Gateway | undefined;
  relay: OutboxRelay | undefined;
  pushOutcomes: PushOutcomes;
  close(): Promise<void>;
}

export function apiRoutes(deps: ApiDeps): Route[] {
  return [
    callEventsRoute(deps),
    callHistoryRoute(deps),
    createCallRoute(deps),
    getCallRoute(deps),
    ...[...CALL_COMMANDS.values()].map((command) => commandRoute(deps, command)),
    readMessagesRoute(deps),
    mediaSessionRoute(deps),
    putPushTokenRoute(deps),
    deletePushTokenRoute(deps),
  ];
}

/** What every role is started with: one set of Redis connections and one metrics registry. */
interface RoleContext {
  config: Config;
  redisTarget: RedisTarget;
  redis: RedisClient;
  deps: ApiDeps;
  ks: { prefix: string; shards: number };
  metrics: Metrics;
  logger: Logger;
}

/** A started role: its public routes, if any, and how to stop it (docs/operations.md "Operations"). */
interface StartedRole {
  routes?: Route[];
  close(): Promise<void>;
}

/** Starts the roles named in config.ROLES on one uWS app and one set of Redis connections. */
export async function startServer(
  config: Config,
  redisTarget: RedisTarget,
  logger: Logger,
  extraHandlers: readonly ChangeHandler[] = [],
  options: StartOptions = {},
): Promise<RunningServer> {
  const { uWS, build: uwsBuild } = loadUws(config.ALLOW_UWS_FALLBACK);
  const redis = connectRedis(redisTarget, 'commands', 'calling-backend', config.REDIS_COMMAND_TIMEOUT_MS);
  await redis.connect();
  await loadScripts(redis);

  const ks = { prefix: config.REDIS_PREFIX, shards: config.CALL_SHARDS };
  const metrics = new Metrics();
  observeScripts(redis, (script, seconds) => metrics.scriptDuration.observe({ script }, seconds));
  const ctx: RoleContext = { config, redisTarget, redis, deps: apiDeps(config, redis, ks), ks, metrics, logger };

  const app = uWS.App();
  const api = config.ROLES.includes('api') ? startApi(ctx, options) : undefined;
  const gateway = config.ROLES.includes('gateway') ? await startGateway(ctx, app) : undefined;
  const worker = config.ROLES.includes('worker') ? await startWorker(ctx, extraHandlers) : undefined;
  // The relay feeds the queues and the gateways serve what the relay appended: stop in this order.
  const roles = [api, gateway, worker].filter((r): r is StartedRole => r !== undefined);

  // A stalled Redis is not ready: answers within a second whatever REDIS_COMMAND_TIMEOUT_MS says.
  const redisUp = () => Promise.race([redis.ping().then((r) => r === 'PONG'), sleep(900).then(() => false)]).catch(() => false);
  metrics.gauge('redis_up', 'Whether Redis answered PING within 900 ms at scrape time (1) or not (0)', async () => ((await redisUp()) ? 1 : 0));
  metrics.gauge('outbox_pending_entries', 'Outbox entries not yet relayed (all shards)', async () => {
    // One auto-pipelined round trip (per primary on a cluster: the shards live in different slots).
    const lengths = await Promise.all(Array.from({ length: ks.shards }, (_, i) => redis.xlen(keys.outboxForShard(ks, i))));
    return lengths.reduce((sum, n) => sum + n, 0);
  });

  let accepting = true;
  const openApiText = JSON.stringify(openApiDocument());
  const routes = ([
    ...healthRoutes({ accepting: () => accepting, redisReady: redisUp }),
    { method: 'get', pattern: '/v1/openapi.json', handler: () => ({ status: 200, body: openApiText }) },
    ...roles.flatMap((r) => r.routes ?? []),
  ] satisfies Route[]).map((r): Route => (tracingEnabled() ? traced(r) : r));
  const inFlight = { count: 0 };
  mountRoutes(app, routes, {
    bodyLimitBytes: config.BODY_LIMIT_BYTES,
    clientIpHeader: config.CLIENT_IP_HEADER,
    cors: config.CORS_ORIGINS,
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
    classifyError: unavailableError,
  });
  mountNotFound(app, config.CORS_ORIGINS);

  const listenSocket = await new Promise<unknown>((res, rej) => {
    app.listen(config.HOST, config.PORT, (sock) => (sock ? res(sock) : rej(new Error(`cannot listen on ${config.HOST}:${config.PORT}`))));
  });
  const port = uWS.us_socket_local_port(listenSocket as never);
  const metricsServer = await startMetricsServer(metrics, config.METRICS_HOST, config.METRICS_PORT);
  logger.info({ port, metricsPort: metricsServer.port, roles: config.ROLES, uws: uwsBuild, node: process.version }, 'listening');

  return {
    port,
    metricsPort: metricsServer.port,
    redis,
    gateway: gateway?.gateway,
    relay: worker?.relay,
    pushOutcomes: worker?.pushOutcomes ?? new Map(),
    /**
     * Graceful shutdown: not ready (and, for SHUTDOWN_DRAIN_MS, still serving), stop accepting connections, let in-flight requests finish,
     * close sockets with 1001 (reconnect with your cursor), stop the relay and let the queue
     * workers finish their active jobs, then drop idle keep-alive connections and quit Redis.
     * The caller bounds the whole with SHUTDOWN_TIMEOUT_MS.
     */
    async close() {
      accepting = false;
      // Not ready, still serving: a load balancer polling /readyz moves traffic away first.
      if (config.SHUTDOWN_DRAIN_MS > 0) await new Promise((r) => setTimeout(r, config.SHUTDOWN_DRAIN_MS));
      uWS.us_listen_socket_close(listenSocket as never);
      while (inFlight.count > 0) await new Promise((r) => setTimeout(r, 10));
      for (const role of roles) await role.close();
      // Requests that came in on kept-alive connections meanwhile are answered too; closing the
      // app in the same tick as this check cuts off none whose handler already started.
      while (inFlight.count > 0) await new Promise((r) => setTimeout(r, 10));
      (app as unknown as { close?: () => void }).close?.();
      await metricsServer.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

function apiDeps(config: Config, redis: RedisClient, ks: { prefix: string; shards: number }): ApiDeps {
  return {
    config,
    calls: new CallStore(redis, {
      ...ks,
      ringTimeoutMs: config.RING_TIMEOUT_MS,
      retentionMs: config.CALL_RETENTION_MS,
      historyRetentionMs: daysMs(config.CALL_RECORD_RETENTION_DAYS),
      operationTtlMs: config.IDEMPOTENCY_TTL_MS,
      callWaiting: config.CALL_WAITING,
      maxRenamesPerCall: config.RENAMES_PER_CALL,
      // Counted by the message script itself (src/calls/store.ts).
      messagesPerWindow: config.RATE_CALL_MESSAGES_PER_10S,
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
      serverKeys: new ServerKeys(config.SERVER_API_KEYS),
    },
    limits: {
      callCreates: limiter(redis, config.RATE_CALL_CREATES_PER_MIN, 60_000, (s: { userId: string }) => keys.callCreateLimit(ks, s.userId)),
      invitesPerCallee: limiter(redis, config.RATE_INVITES_PER_CALLEE_PER_MIN, 60_000, (s: { calleeUserId: string }) => keys.inviteLimit(ks, s.calleeUserId)),
      renames: limiter(redis, config.RATE_RENAMES_PER_MIN, 60_000, (s: { userId: string }) => keys.renameLimit(ks, s.userId)),
      pushTokenWrites: limiter(redis, config.RATE_PUSH_TOKEN_WRITES_PER_HOUR, 3_600_000, (s: { userId: string; installationId: string }) =>
        keys.pushTokenWriteLimit(ks, s.userId, s.installationId),
      ),
    },
    pushRegistry: new PushRegistry(redis, ks, daysMs(config.PUSH_REGISTRATION_IDLE_DAYS)),
    history: new CallHistory(redis, { ...ks, historyRetentionMs: daysMs(config.CALL_RECORD_RETENTION_DAYS) }),
    webhooks: {
      endpoints: webhookEndpoints(config),
      states: new EndpointStates(redis, ks),
      deadLetters: new DeadLetters(redis, ks, config.WEBHOOK_DEAD_LETTERS_MAX),
    },
    pushApps: registrableApps(pushApps(config)),
    eventLog: new EventLog(redis, {
      ...ks,
      maxLen: config.EVENT_LOG_MAX_LEN,
      maxAgeMs: config.EVENT_LOG_MAX_AGE_MS,
      // The epoch outlives the entries, so an old cursor reports `trimmed` rather than `reset`.
      metaTtlMs: config.EVENT_LOG_MAX_AGE_MS * 7,
    }),
  };
}

/** A duration configured in days (fractions allowed: CALL_RECORD_RETENTION_DAYS, PUSH_REGISTRATION_IDLE_DAYS), in ms. */
function daysMs(days: number): number {
  return Math.round(days * DAY_MS);
}

/** A Redis rate limiter, or none when its limit is 0 (switched off). */
function limiter<S>(redis: RedisClient, limit: number, windowMs: number, keyOf: (s: S) => string): RedisRateLimiter<S> | undefined {
  return limit > 0 ? new RedisRateLimiter(redis, { limit, windowMs }, keyOf) : undefined;
}

/**
 * The HTTP API: the device routes, the server API's (docs/server-api.md) and the softphone's when
 * DEMO is on. Its only connection of its own is the queue one a dead-letter replay opens.
 */
function startApi(ctx: RoleContext, options: StartOptions): StartedRole {
  const { deps, config } = ctx;
  const routes = apiRoutes(deps);
  // Below a day, a client still retrying an operation (a phone back from a long loss of network)
  // may find its outcome gone (docs/api.md "Idempotency").
  if (config.IDEMPOTENCY_TTL_MS < DAY_MS) {
    ctx.logger.warn(
      { idempotencyTtlMs: config.IDEMPOTENCY_TTL_MS },
      `IDEMPOTENCY_TTL_MS is below 24 h: a client retry more than ${config.IDEMPOTENCY_TTL_MS} ms after its first attempt is taken as a new request`,
    );
  }
  const serverAuth: ServerAuth = { keys: deps.auth.serverKeys!, guard: deps.auth };
  const users = new UserAdmin(ctx.redis, ctx.ks, deps.calls, deps.history, deps.pushRegistry);
  let replayQueues: { connection: RedisClient; queues: ReturnType<typeof createWebhookQueues> } | undefined;
  // BullMQ writes its queue's keys once it is made: only when a replay needs it.
  const replayQueue = () => {
    if (!replayQueues) {
      const connection = connectRedis(ctx.redisTarget, 'queues', 'calling-backend-queues');
      replayQueues = { connection, queues: createWebhookQueues(connection, { ...ctx.ks, partitions: queuePartitions(config) }) };
    }
    return replayQueues.queues[0]!;
  };
  const replay = (id: string) => replayDeadLetter(deps.webhooks.deadLetters, replayQueue, id);
  routes.push(
    ...serverCallRoutes(serverAuth, { calls: deps.calls, history: deps.history, users }),
    ...serverUserRoutes(serverAuth, users),
    ...serverWebhookRoutes(serverAuth, deps.webhooks, replay),
  );
  if (ctx.config.DEMO) {
    routes.push(...demoRoutes({ dir: DEMO_DIR, devTokenSecret: options.devTokenSecret }));
    ctx.logger.info({ devTokens: options.devTokenSecret !== undefined }, 'serving the browser softphone at /demo/');
  }
  return {
    routes,
    async close() {
      if (!replayQueues) return;
      await Promise.all(replayQueues.queues.map((q) => q.close()));
      replayQueues.connection.disconnect();
    },
  };
}

/** The signaling gateway: WebSockets on the same app, fed by sharded Pub/Sub. */
async function startGateway(ctx: RoleContext, app: ReturnType<Uws['App']>): Promise<StartedRole & { gateway: Gateway }> {
  const { config, metrics } = ctx;
  const subscriber = connectRedis(ctx.redisTarget, 'subscriber', 'calling-backend');
  await subscriber.connect();
  const gateway = new Gateway(subscriber, ctx.deps.eventLog, ctx.deps.auth, ctx.logger, {
    ...ctx.ks,
    messagesPer10s: config.RATE_WS_MESSAGES_PER_10S,
    maxSocketsPerUser: config.WS_MAX_SOCKETS_PER_USER,
    clientIpHeader: config.CLIENT_IP_HEADER,
    allowedOrigins: config.WS_CHECK_ORIGIN ? config.CORS_ORIGINS : undefined,
    idleTimeoutS: config.WS_IDLE_TIMEOUT_S,
    maxMessageBytes: config.WS_MAX_MESSAGE_BYTES,
    maxBackpressureBytes: config.WS_MAX_BACKPRESSURE_BYTES,
    readBatch: 200,
  }, ctx.deps);
  gateway.mount(app);
  gateway.startSweeps();
  metrics.gaugesFrom('ws_open_sockets', 'Open signaling WebSockets by encoding (json, msgpack)', ['encoding'], () =>
    [...gateway.openSocketsByEncoding()].map(([encoding, n]) => [[encoding], n]),
  );
  metrics.countersFrom('ws_events_sent_total', 'Events sent over signaling', [], () => [[[], gateway.stats.eventsSent]]);
  metrics.countersFrom('ws_early_events_sent_total', 'Of the events sent over signaling, those sent early, ahead of the log', [], () => [[[], gateway.stats.earlyEventsSent]]);
  metrics.countersFrom('ws_messages_sent_total', 'In-call messages sent over signaling', [], () => [[[], gateway.stats.messagesSent]]);
  metrics.countersFrom('ws_commands_total', 'Command frames answered, by command and status (docs/signaling.md "Commands")', ['command', 'status'], () =>
    [...gateway.stats.commands].map(([key, n]): [string[], number] => [key.split(' '), n]),
  );
  metrics.countersFrom('ws_rate_limited_total', 'Sockets closed for too many client messages (4029)', [], () => [[[], gateway.stats.rateLimited]]);
  metrics.countersFrom('ws_slow_consumers_closed_total', 'Sockets closed as slow consumers (4008)', [], () => [[[], gateway.stats.slowConsumersClosed]]);
  return {
    gateway,
    async close() {
      gateway.closeAll();
      subscriber.disconnect();
    },
  };
}

/** The worker: outbox relays, first push attempts and retries, ring sweeps. */
async function startWorker(
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
  const webhooks = startWebhooks(deps.webhooks, { redis, connection: queueConnection, partitioning, config, metrics, logger, registry: deps.pushRegistry });
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
  });
  const retryWorkers = startPushRetryWorkers(queueConnection, partitioning, config.PUSH_CONCURRENCY, dispatcher, logger);
  const sweeper = await RingSweeper.start(
    redis,
    queueConnection,
    { ...partitioning, retentionMs: config.CALL_RETENTION_MS, historyRetentionMs: daysMs(config.CALL_RECORD_RETENTION_DAYS), pageSize: 500, tickMs: config.RING_SWEEP_TICK_MS, slotMs: 1000, ringTimeoutMs: config.RING_TIMEOUT_MS },
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
  metrics.gauge('ringing_calls', "Calls ringing now (in the shards' ring indexes, all shards)", async () => {
    const counts = await Promise.all(Array.from({ length: ks.shards }, (_, i) => redis.zcard(keys.ringingForShard(ks, i))));
    return counts.reduce((a, b) => a + b, 0);
  });
  const handlers: ChangeHandler[] = [
    callChangeObserver(metrics, logger),
    pushHandler(dispatcher, enabled),
    ...webhooks.handlers,
    ...extraHandlers,
  ];
  const blockingConnections = new Set<RedisClient>();
  const relay = new OutboxRelay(
    redis,
    async () => {
      const c = connectRedis(ctx.redisTarget, 'blocking', 'calling-backend-relay');
      await c.connect();
      blockingConnections.add(c);
      c.once('end', () => blockingConnections.delete(c));
      return c;
    },
    deps.eventLog,
    handlers,
    logger,
    { ...ks, historyRetentionMs: daysMs(config.CALL_RECORD_RETENTION_DAYS), batchSize: config.RELAY_BATCH_SIZE, blockMs: 1000, leaseMs: config.RELAY_CLAIM_IDLE_MS },
  );
  await relay.start();
  metrics.countersFrom('relay_changes_total', 'Call changes relayed from the outbox', [], () => [[[], relay.relayed]]);
  return {
    relay,
    pushOutcomes,
    // The relay feeds the queues: stop it first, then let the workers finish their active jobs.
    async close() {
      await relay.stop();
      for (const c of blockingConnections) c.disconnect();
      await Promise.all([sweeper.close(), ...retryWorkers.map((w) => w.close()), webhooks.close()]);
      await Promise.all(retryQueues.map((q) => q.close()));
      await senders.close?.();
      queueConnection.disconnect();
    },
  };
}

/** The route with a server span around its handler (docs/operations.md "Tracing"); a 4xx is not a failure. */
function traced(route: Route): Route {
  const name = `${route.method === 'del' ? 'DELETE' : route.method.toUpperCase()} ${route.pattern}`;
  return {
    ...route,
    handler: (ctx) =>
      inSpan(
        name,
        {
          kind: SpanKind.SERVER,
          parent: ctx.traceparent || undefined,
          attributes: { 'http.route': route.pattern, 'http.request.method': ctx.method.toUpperCase() },
          errorIf: (err) => !(err instanceof ApiError) || err.status >= 500,
        },
        async (span) => {
          try {
            const reply = await route.handler(ctx);
            span?.setAttribute('http.response.status_code', reply.status);
            return reply;
          } catch (err) {
            if (err instanceof ApiError) span?.setAttribute('http.response.status_code', err.status);
            throw err;
          }
        },
      ),
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

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}
