import type { CallChange, ChangeHandler } from '../calls/change.js';
import type { Logger } from '../util/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { memberOf, memberOutcome, wasAnswered } from '../calls/model.js';

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
  for (const change of changes) {
    const { kind, call, atMs } = change;
    metrics.relayLag.observe(Math.max(0, nowMs - atMs) / 1000);
    observeReceipts(metrics, change);
    if (call.group) {
      observeGroup(metrics, change);
      continue;
    }
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

/**
 * Ringing receipts (docs/group-calls.md "Ringing receipts"): the time from each invitation to its
 * first receipt, by delivery path, and at a call's end the invitees that never sent one.
 */
function observeReceipts(metrics: Metrics, { kind, call, subjects }: CallChange): void {
  if (kind === 'ringing') {
    for (const u of subjects ?? []) {
      const m = memberOf(call, u);
      const at = m ? m.ringingAtMs : call.ringingAtMs;
      const via = (m ? m.via : call.ringingVia) ?? 'unknown';
      if (at !== undefined) metrics.invitationReceiptSeconds.observe({ via }, Math.max(0, at - (m?.invitedAtMs ?? call.createdAtMs)) / 1000);
    }
  } else if (kind === 'ended') {
    const silent = call.group
      ? call.group.members.filter((m) => m.invitedAtMs !== undefined && m.state !== 'busy' && m.ringingAtMs === undefined).length
      : call.endReason === 'busy' && call.endedBy === 'system'
        ? 0
        : Number(call.ringingAtMs === undefined);
    if (silent > 0) metrics.invitationsUnacknowledged.inc(silent);
  }
}

/** A group call: created, members per call, and each member's outcome at the end. */
function observeGroup(metrics: Metrics, { kind, call }: CallChange): void {
  const members = call.group!.members.filter((m) => m.userId !== call.callerUserId);
  if (kind === 'created') {
    metrics.groupCallsCreated.inc();
    metrics.groupCallMembers.observe(members.length);
  } else if (kind === 'ended') {
    metrics.callsEnded.inc({ reason: call.endReason ?? 'unknown', ended_by: call.endedBy ?? 'system' });
    for (const m of members) {
      metrics.groupMemberOutcomes.inc({ outcome: memberOutcome(m) });
    }
  }
}
