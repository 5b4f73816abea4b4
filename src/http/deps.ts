import type { Config } from '../config/config.js';
import type { CallStore } from '../calls/store.js';
import type { TokenVerifier } from '../auth/verifier.js';
import type { PushRegistry } from '../push/registry.js';
import type { EventLog } from '../events/eventLog.js';

/** What the HTTP endpoints need; built once by the server. */
export interface ApiDeps {
  config: Config;
  calls: CallStore;
  verify: TokenVerifier;
  pushRegistry: PushRegistry;
  eventLog: EventLog;
}
