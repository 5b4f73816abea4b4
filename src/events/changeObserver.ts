import type { CallChange, ChangeHandler } from '../calls/change.js';
import type { Logger } from '../util/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { calleeField, memberOutcome, wasAnswered, type GroupCall } from '../calls/model.js';
import { participantOf, participants } from '../calls/participants.js';

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
              calleeUserId: calleeField(call),
              ...(call.endReason ? { reason: call.endReason, endedBy: call.endedBy } : {}),
              ...(kind === 'answered' && call.kind === 'pair' ? { answeredBy: call.answeredByInstallationId } : {}),
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
    if (call.kind === 'group') {
      observeGroup(metrics, kind, call);
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
      const p = participantOf(call, u);
      if (p?.ringingAtMs !== undefined) metrics.invitationReceiptSeconds.observe({ via: p.via ?? 'unknown' }, Math.max(0, p.ringingAtMs - (p.invitedAtMs ?? call.createdAtMs)) / 1000);
    }
  } else if (kind === 'ended') {
    // Every invitee rung that never sent one; one that was busy was not rung (or its phone said so).
    const silent = participants(call).filter((p) => p.role === 'invitee' && p.state !== 'busy' && p.ringingAtMs === undefined).length;
    if (silent > 0) metrics.invitationsUnacknowledged.inc(silent);
  }
}

/** A group call: created, members per call, and each member's outcome at the end. */
function observeGroup(metrics: Metrics, kind: CallChange['kind'], call: GroupCall): void {
  const members = call.members.filter((m) => m.userId !== call.callerUserId);
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
