import type { CallChange, ChangeHandler } from '../events/change.js';
import type { Logger } from '../util/logger.js';
import type { Metrics } from './metrics.js';

/**
 * The relay's view of every call change for operators: one `info` line per change (docs/operations.md
 * "Observability": callId, parties by userId, revision, what changed and why; never names,
 * handles or payloads) and the call-outcome metrics. Runs after the change's events are stored.
 */
export function callChangeObserver(metrics: Metrics, logger: Logger): ChangeHandler {
  return {
    name: 'observe',
    handle(changes: readonly CallChange[]) {
      metrics.observeChanges(changes);
      if (logger.isLevelEnabled('info')) {
        for (const { kind, call } of changes) {
          logger.info(
            {
              callId: call.callId,
              change: kind,
              state: call.state,
              revision: Number(call.revision),
              callerUserId: call.callerUserId,
              calleeUserId: call.calleeUserId,
              ...(call.endReason ? { reason: call.endReason, endedBy: call.endedBy } : {}),
              ...(kind === 'answered' ? { answeredBy: call.answeredByInstallationId } : {}),
            },
            'call change',
          );
        }
      }
      return Promise.resolve();
    },
  };
}
