import type { CallChange, ChangeHandler } from '../calls/change.js';
import type { Logger } from '../util/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { wasAnswered } from '../calls/model.js';

/**
 * The relay's view of every call change for operators: one `info` line per change (docs/operations.md
 * "Observability": callId, parties by userId, revision, what changed and why; never names,
 * handles or payloads) and the call-outcome metrics. Runs after the change's events are stored.
 */
export function callChangeObserver(metrics: Metrics, logger: Logger): ChangeHandler {
  return {
    name: 'observe',
    handle(changes: readonly CallChange[]) {
      observeChanges(metrics, changes);
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

/** Counts relayed changes: outcomes, answer and ring times, and how far the relay runs behind. */
export function observeChanges(metrics: Metrics, changes: readonly CallChange[], nowMs = Date.now()): void {
  for (const { kind, call, atMs } of changes) {
    metrics.relayLag.observe(Math.max(0, nowMs - atMs) / 1000);
    if (kind === 'created') metrics.callsCreated.inc();
    else if (kind === 'answered') {
      metrics.callsAnswered.inc();
      const seconds = ((call.acceptedAtMs ?? atMs) - call.createdAtMs) / 1000;
      metrics.answerSeconds.observe(seconds);
      metrics.ringSeconds.observe({ outcome: 'answered' }, seconds);
    } else if (kind === 'ended') {
      const reason = call.endReason ?? 'unknown';
      metrics.callsEnded.inc({ reason, ended_by: call.endedBy ?? 'system' });
      // Ended while ringing: the ringing stopped with this end.
      if (!wasAnswered(call)) metrics.ringSeconds.observe({ outcome: reason }, ((call.endedAtMs ?? atMs) - call.createdAtMs) / 1000);
    }
  }
}
