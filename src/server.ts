import type { Config } from './config/config.js';
import { loadUws } from './transport/uws.js';
import { mountNotFound, mountRoutes, type Route } from './http/router.js';
import { traced } from './http/traced.js';
import { healthRoutes } from './http/endpoints/health.js';
import { unavailableError } from './commands/errors.js';
import { openApiDocument } from './contracts/openapi.js';
import { connectRedis, type RedisClient, type RedisTarget } from './redis/connection.js';
import { loadScripts, observeScripts } from './redis/scripts.js';
import { keys } from './redis/keys.js';
import type { ChangeHandler } from './calls/change.js';
import type { Gateway } from './gateway/gateway.js';
import type { OutboxRelay } from './events/relay.js';
import type { PushOutcomes } from './push/dispatcher.js';
import { Metrics } from './observability/metrics.js';
import { startMetricsServer } from './observability/metricsServer.js';
import { tracingEnabled } from './observability/tracing.js';
import { droppedLogLines, type Logger } from './util/logger.js';
import { roleDeps, type RoleContext, type StartedRole } from './roles/context.js';
import { startApi, type ApiOptions } from './roles/api.js';
import { startGateway } from './roles/gateway.js';
import { startWorker } from './roles/worker.js';

/**
 * One process: the roles the configuration asks for (ROLES; src/roles/: api, gateway, worker) on
 * one uWS app, one Redis command connection and one metrics registry, and its graceful shutdown.
 */

export type StartOptions = ApiOptions;

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
  const ctx: RoleContext = { config, redisTarget, redis, deps: roleDeps(config, redis, ks, metrics, logger), ks, metrics, logger };

  const app = uWS.App();
  const api = config.ROLES.includes('api') ? startApi(ctx, options) : undefined;
  const gateway = config.ROLES.includes('gateway') ? await startGateway(ctx, app) : undefined;
  const worker = config.ROLES.includes('worker') ? await startWorker(ctx, extraHandlers) : undefined;
  // The relay feeds the queues and the gateways serve what the relay appended: stop in this order.
  const roles = [api, gateway, worker].filter((r): r is StartedRole => r !== undefined);

  // A stalled Redis is not ready: answers within a second whatever REDIS_COMMAND_TIMEOUT_MS says.
  const redisUp = () => Promise.race([redis.ping().then((r) => r === 'PONG'), sleep(900).then(() => false)]).catch(() => false);
  metrics.countersFrom('log_lines_dropped_total', "Log lines dropped because stdout's reader fell too far behind (src/util/logger.ts)", [], () => [[[], droppedLogLines()]]);
  metrics.gauge('redis_up', 'Whether Redis answered PING within 900 ms at scrape time (1) or not (0)', async () => ((await redisUp()) ? 1 : 0));
  metrics.gauge('outbox_pending_entries', 'Outbox entries not yet relayed (all shards)', async () => {
    // One auto-pipelined round trip (per primary on a cluster: the shards live in different slots).
    const lengths = await Promise.all(Array.from({ length: ks.shards }, (_, i) => redis.xlen(keys.outboxForShard(ks, i))));
    return lengths.reduce((sum, n) => sum + n, 0);
  });

  // Reported whenever an SFU is configured: group calls use it whatever MEDIA_MODE says.
  const sfu = ctx.deps.media.sfu;
  let accepting = true;
  const openApiText = JSON.stringify(openApiDocument());
  const routes = ([
    ...healthRoutes({ accepting: () => accepting, redisReady: redisUp, sfuReady: sfu && (() => sfu.ready()) }),
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

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}
