import { CallPolicyStore } from '../calls/callPolicy.js';
import type { Config } from '../config/config.js';
import type { RedisClient, RedisTarget } from '../redis/connection.js';
import { createTokenVerifier } from '../auth/verifier.js';
import { FailureCounter, RedisRateLimiter } from '../limits/rateLimiter.js';
import { CallStore } from '../calls/store.js';
import { DAY_MS } from '../calls/retention.js';
import { PushRegistry } from '../push/registry.js';
import { MissedCallSeen } from '../push/missedCallSeen.js';
import { registrableApps } from '../push/providers.js';
import { pushApps } from '../config/pushApps.js';
import type { ApiDeps } from '../http/deps.js';
import type { Route } from '../http/router.js';
import type { Logger } from '../util/logger.js';
import { EventLog } from '../events/eventLog.js';
import type { Metrics } from '../observability/metrics.js';
import { keys } from '../redis/keys.js';
import { CallHistory } from '../history/callHistory.js';
import { webhookEndpoints } from '../webhooks/endpoints.js';
import { EndpointStates } from '../webhooks/endpointStates.js';
import { DeadLetters } from '../webhooks/deadLetters.js';
import { ServerKeys } from '../auth/serverKeys.js';
import { createSfu } from '../media/callMedia.js';

/**
 * What the three roles (docs/architecture.md "Overview": api, gateway, worker) share in one
 * process: the configuration, one command connection to Redis, one metrics registry, and the
 * domain objects over them.
 */

/** What every role is started with: one set of Redis connections and one metrics registry. */
export interface RoleContext {
  config: Config;
  redisTarget: RedisTarget;
  redis: RedisClient;
  deps: ApiDeps;
  ks: { prefix: string; shards: number };
  metrics: Metrics;
  logger: Logger;
}

/** A started role: its public routes, if any, and how to stop it (docs/operations.md "Operations"). */
export interface StartedRole {
  routes?: Route[];
  close(): Promise<void>;
}

export function roleDeps(config: Config, redis: RedisClient, ks: { prefix: string; shards: number }, metrics: Metrics, logger: Logger): ApiDeps {
  return {
    config,
    media: { mode: config.MEDIA_MODE, sfu: createSfu(config, metrics) },
    calls: new CallStore(redis, {
      ...ks,
      ringTimeoutMs: config.RING_TIMEOUT_MS,
      retentionMs: config.CALL_RETENTION_MS,
      operationTtlMs: config.IDEMPOTENCY_TTL_MS,
      callWaiting: config.CALL_WAITING,
      screenedReply: config.SCREENED_CALL_REPLY,
      callRecordFormat: config.CALL_RECORD_FORMAT,
      maxRenamesPerCall: config.RENAMES_PER_CALL,
      maxGroupInvitees: config.GROUP_CALL_MAX_MEMBERS,
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
    missedCallSeen: new MissedCallSeen(redis, { ...ks, ringTimeoutMs: config.RING_TIMEOUT_MS, alertGraceMs: config.MISSED_CALL_ALERT_GRACE_MS }, logger),
    policies: new CallPolicyStore(redis, ks),
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
export function daysMs(days: number): number {
  return Math.round(days * DAY_MS);
}

/** A Redis rate limiter, or none when its limit is 0 (switched off). */
function limiter<S>(redis: RedisClient, limit: number, windowMs: number, keyOf: (s: S) => string): RedisRateLimiter<S> | undefined {
  return limit > 0 ? new RedisRateLimiter(redis, { limit, windowMs }, keyOf) : undefined;
}

