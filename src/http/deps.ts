import type { Config } from '../config/config.js';
import type { CallStore } from '../calls/store.js';
import type { AuthGuard } from '../auth/guard.js';
import type { RedisRateLimiter } from '../limits/rateLimiter.js';
import type { PushRegistry } from '../push/registry.js';
import type { EventLog } from '../events/eventLog.js';

/** What the HTTP endpoints need; built once by the server. */
export interface ApiDeps {
  config: Config;
  calls: CallStore;
  auth: AuthGuard;
  /** Per-user call creation and per-installation push-token writes (undefined: no limit). */
  limits: {
    callCreates: RedisRateLimiter | undefined; pushTokenWrites: RedisRateLimiter | undefined; renames: RedisRateLimiter | undefined;
    /** In-call messages per call and sender. */
    callMessages?: RedisRateLimiter | undefined;
  };
  pushRegistry: PushRegistry;
  eventLog: EventLog;
}
