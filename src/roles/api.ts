import { connectRedis, type RedisClient } from '../redis/connection.js';
import { queuePartitions } from '../config/config.js';
import { DAY_MS } from '../calls/retention.js';
import type { ApiDeps } from '../http/deps.js';
import type { Route } from '../http/router.js';
import { createCallRoute } from '../http/endpoints/createCall.js';
import { getCallRoute } from '../http/endpoints/getCall.js';
import { mediaSessionRoute } from '../http/endpoints/mediaSession.js';
import { deletePushTokenRoute, putPushTokenRoute } from '../http/endpoints/pushTokens.js';
import { callEventsRoute } from '../http/endpoints/callEvents.js';
import { readMessagesRoute } from '../http/endpoints/callMessages.js';
import { callHistoryRoute } from '../http/endpoints/callHistory.js';
import { callPolicyRoutes } from '../http/endpoints/callPolicy.js';
import { serverPolicyRoutes } from '../http/endpoints/server/serverPolicy.js';
import { commandRoute } from '../http/endpoints/callRoute.js';
import type { ServerAuth } from '../http/endpoints/server/serverRoute.js';
import { serverCallRoutes } from '../http/endpoints/server/serverCalls.js';
import { serverUserRoutes } from '../http/endpoints/server/serverUsers.js';
import { serverWebhookRoutes } from '../http/endpoints/server/serverWebhooks.js';
import { CALL_COMMANDS } from '../commands/callCommands.js';
import { DEMO_DIR, demoRoutes } from '../demo/demoRoutes.js';
import { janusClientUrls } from '../media/callMedia.js';
import { createWebhookQueues } from '../webhooks/queue.js';
import { replayDeadLetter } from '../webhooks/deadLetters.js';
import { UserAdmin } from '../users/userAdmin.js';
import type { RoleContext, StartedRole } from './context.js';

/** The api role: the HTTP API's routes (docs/api.md, docs/server-api.md). */

/** The device routes of the HTTP API. */
export function apiRoutes(deps: ApiDeps): Route[] {
  return [
    callEventsRoute(deps),
    callHistoryRoute(deps),
    ...callPolicyRoutes(deps),
    createCallRoute(deps),
    getCallRoute(deps),
    ...[...CALL_COMMANDS.values()].map((command) => commandRoute(deps, command)),
    readMessagesRoute(deps),
    mediaSessionRoute(deps),
    putPushTokenRoute(deps),
    deletePushTokenRoute(deps),
  ];
}

export interface ApiOptions {
  /**
   * The dev signing secret, when the process runs in dev mode (`--dev`): with DEMO=true the
   * softphone can then get tokens from /demo-api/token. Never set in production.
   */
  devTokenSecret?: string | undefined;
}

/**
 * The HTTP API: the device routes, the server API's (docs/server-api.md) and the softphone's when
 * DEMO is on. Its only connection of its own is the queue one a dead-letter replay opens.
 */
export function startApi(ctx: RoleContext, options: ApiOptions): StartedRole {
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
  // The first step of a rolling upgrade, not a place to stay: string calls cost 3 commands fewer.
  if (config.CALL_RECORD_FORMAT === 'hash') {
    ctx.logger.warn(
      'CALL_RECORD_FORMAT is hash: new calls are stored as versions before 2026-11-26 read them; set string once no process of such a version runs (docs/operations.md "Upgrading")',
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
    ...serverPolicyRoutes(serverAuth, deps.policies),
    ...serverWebhookRoutes(serverAuth, deps.webhooks, replay),
  );
  if (ctx.config.DEMO) {
    // The page's group calls speak to Janus only (demo/groupMedia.js).
    const connectTo = config.SFU === 'janus' ? janusClientUrls(config) : [];
    routes.push(...demoRoutes({ dir: DEMO_DIR, devTokenSecret: options.devTokenSecret, connectTo }));
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

