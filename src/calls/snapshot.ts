import { wasAnswered, type CallRecord } from './model.js';
import { reasonForSide, type EndReason, type Side } from './reasons.js';

/** The call snapshot (docs/protocol.md "Call snapshot"), as one side sees it. */
export interface CallSnapshot {
  schemaVersion: 1;
  callId: string;
  revision: string;
  state: CallRecord['state'];
  caller: { userId: string; displayName: string; handle: string };
  calleeUserId: string;
  createdAtMs: number;
  expiresAtMs: number;
  video: boolean;
  answeredByInstallationId?: string;
  acceptedAtMs?: number;
  endedAtMs?: number;
  endReason?: EndReason;
}

/** Field order is fixed, so one record always renders to the same bytes (replays rely on it). */
export function toSnapshot(call: CallRecord, viewer: Side): CallSnapshot {
  const snap: CallSnapshot = {
    schemaVersion: 1,
    callId: call.callId,
    revision: call.revision,
    state: call.state,
    caller: { userId: call.callerUserId, displayName: call.callerDisplayName, handle: call.callerHandle },
    calleeUserId: call.calleeUserId,
    createdAtMs: call.createdAtMs,
    expiresAtMs: call.expiresAtMs,
    video: call.video,
  };
  if (call.answeredByInstallationId !== undefined) snap.answeredByInstallationId = call.answeredByInstallationId;
  if (call.acceptedAtMs !== undefined) snap.acceptedAtMs = call.acceptedAtMs;
  if (call.endedAtMs !== undefined) snap.endedAtMs = call.endedAtMs;
  if (call.state === 'ended' && call.endReason !== undefined) {
    snap.endReason = reasonForSide(call.endReason, call.endedBy ?? 'system', wasAnswered(call), viewer);
  }
  return snap;
}
