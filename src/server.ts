import type { Redis } from 'ioredis';
import type { Config } from './config/config.js';
import { loadUws } from './http/uws.js';
import { mountNotFound, mountRoutes, type Route } from './http/router.js';
import { ApiError } from './http/errors.js';
import { connectRedis, isRedisUnavailable } from './redis/connection.js';
import { scriptSources } from './redis/scripts.js';
import { createTokenVerifier } from './auth/verifier.js';
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

export interface RunningServer {
  port: number;
  redis: Redis;
  close(): Promise<void>;
}

export function apiRoutes(deps: ApiDeps): Route[] {
  return [
    createCallRoute(deps),
    getCallRoute(deps),
    answerCallRoute(deps),
    endCallRoute(deps),
    mediaSessionRoute(deps),
    putPushTokenRoute(deps),
    deletePushTokenRoute(deps),
  ];
}

/** Starts the roles named in config.ROLES on one uWS app and one set of Redis connections. */
export async function startServer(config: Config, redisUrl: string, logger: Logger): Promise<RunningServer> {
  const uWS = loadUws(config.ALLOW_UWS_FALLBACK);
  const redis = connectRedis(redisUrl, 'commands', 'calling-backend');
  await redis.connect();
  // Load every script once up front so the first requests do not pay for it.
  await Promise.all([...scriptSources().values()].map((lua) => redis.script('LOAD', lua)));

  const ks = { prefix: config.REDIS_PREFIX, shards: config.CALL_SHARDS };
  const deps: ApiDeps = {
    config,
    calls: new CallStore(redis, {
      ...ks,
      ringTimeoutMs: config.RING_TIMEOUT_MS,
      retentionMs: config.CALL_RETENTION_MS,
      operationTtlMs: config.IDEMPOTENCY_TTL_MS,
    }),
    verify: createTokenVerifier({
      secret: config.AUTH_JWT_SECRET,
      publicKeyPem: config.AUTH_JWT_PUBLIC_KEY,
      jwksUrl: config.AUTH_JWKS_URL,
      issuer: config.AUTH_ISSUER,
      audience: config.AUTH_AUDIENCE,
    }),
    pushRegistry: new PushRegistry(redis, ks),
  };

  let accepting = true;
  const app = uWS.App();
  const routes: Route[] = healthRoutes({
    accepting: () => accepting,
    redisReady: async () => (await redis.ping()) === 'PONG',
  });
  if (config.ROLES.includes('api')) routes.push(...apiRoutes(deps));
  mountRoutes(app, routes, {
    bodyLimitBytes: config.BODY_LIMIT_BYTES,
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
    async close() {
      accepting = false;
      uWS.us_listen_socket_close(listenSocket as never);
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
