import type { Config } from '../config/config.js';
import type { CallStore } from '../calls/store.js';
import type { AuthGuard } from '../auth/guard.js';
import type { RedisRateLimiter } from '../limits/rateLimiter.js';
import type { PushRegistry } from '../push/registry.js';
import type { EventLog } from '../events/eventLog.js';
import type { CallHistory } from '../history/callHistory.js';
import type { WebhookDeps } from '../webhooks/webhookWorkers.js';

/** What the HTTP endpoints need; built once by the server. */
export interface ApiDeps {
  config: Config;
  calls: CallStore;
  auth: AuthGuard;
  /** Per-user call creation and per-installation push-token writes (undefined: no limit). */
  /** Per-user and per-installation limits (docs/api.md "Abuse limits"); undefined when switched off. */
  limits: {
    callCreates: RedisRateLimiter<{ userId: string }> | undefined;
    /** Invitations to one callee from all callers together. */
    invitesPerCallee: RedisRateLimiter<{ calleeUserId: string }> | undefined;
    pushTokenWrites: RedisRateLimiter<{ userId: string; installationId: string }> | undefined;
    renames: RedisRateLimiter<{ userId: string }> | undefined;
    // In-call messages per call and sender are counted by the message script (StoreSettings.messagesPerWindow).
  };
  pushRegistry: PushRegistry;
  /** The appIds registrations may carry (docs/push-apps.md); undefined: any (single-app configuration). */
  pushApps: ReadonlyMap<string, { ios: boolean; android: boolean }> | undefined;
  eventLog: EventLog;
  /** Call history and active calls by user (docs/call-history.md). */
  history: CallHistory;
  /** Webhook endpoints, which are disabled, and the dead letters (docs/webhooks.md). */
  webhooks: WebhookDeps;
}
