import type { Config } from '../config/config.js';
import type { CallStore } from '../calls/store.js';
import type { AuthGuard } from '../auth/guard.js';
import type { CommandDeps } from '../commands/command.js';
import type { PushRegistry } from '../push/registry.js';
import type { MissedCallSeen } from '../push/missedCallSeen.js';
import type { EventLog } from '../events/eventLog.js';
import type { CallHistory } from '../history/callHistory.js';
import type { WebhookDeps } from '../webhooks/webhookWorkers.js';
import type { CallMedia } from '../media/callMedia.js';
import type { CallPolicyStore } from '../calls/callPolicy.js';

/** What the HTTP endpoints need; built once by the server. */
export interface ApiDeps extends CommandDeps {
  config: Config;
  calls: CallStore;
  auth: AuthGuard;
  pushRegistry: PushRegistry;
  missedCallSeen: MissedCallSeen;
  /** The appIds registrations may carry (docs/push-apps.md); undefined: any (single-app configuration). */
  pushApps: ReadonlyMap<string, { ios: boolean; android: boolean }> | undefined;
  eventLog: EventLog;
  /** Call history and active calls by user (docs/call-history.md). */
  history: CallHistory;
  /** Webhook endpoints, which are disabled, and the dead letters (docs/webhooks.md). */
  webhooks: WebhookDeps;
  /** What calls' media goes through: MEDIA_MODE and the configured SFU (docs/operations.md "SFU media"). */
  media: CallMedia;
  /** Who may call each user (docs/call-policy.md). */
  policies: CallPolicyStore;
}
