import { calleeField, wasAnswered, type CallRecord, type MemberState } from './model.js';
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
  /** A group call only (docs/group-calls.md "Snapshot"). */
  title?: string;
  participants?: ParticipantView[];
}

/** One member of a group call as its snapshot shows it. */
export interface ParticipantView {
  userId: string;
  state: MemberState;
  installationId?: string;
  invitedAtMs?: number;
  ringUntilMs?: number;
  joinedAtMs?: number;
  leftAtMs?: number;
}

/** Field order is fixed, so one record always renders to the same bytes (replays rely on it). */
export function toSnapshot(call: CallRecord, viewer: Side): CallSnapshot {
  const snap: CallSnapshot = {
    schemaVersion: 1,
    callId: call.callId,
    revision: call.revision,
    state: call.state,
    caller: { userId: call.callerUserId, displayName: call.callerDisplayName, handle: call.callerHandle },
    calleeUserId: calleeField(call),
    createdAtMs: call.createdAtMs,
    expiresAtMs: call.expiresAtMs,
    video: call.video,
  };
  if (call.kind === 'pair' && call.answeredByInstallationId !== undefined) snap.answeredByInstallationId = call.answeredByInstallationId;
  if (call.acceptedAtMs !== undefined) snap.acceptedAtMs = call.acceptedAtMs;
  if (call.endedAtMs !== undefined) snap.endedAtMs = call.endedAtMs;
  if (call.state === 'ended' && call.endReason !== undefined) {
    snap.endReason = reasonForSide(call.endReason, call.endedBy ?? 'system', wasAnswered(call), viewer);
  }
  if (call.kind === 'group') {
    snap.title = call.title;
    snap.participants = call.members.map((m) => {
      const p: ParticipantView = { userId: m.userId, state: m.state };
      if (m.installationId !== undefined && (m.state === 'joined' || m.state === 'left')) p.installationId = m.installationId;
      if (m.invitedAtMs !== undefined) p.invitedAtMs = m.invitedAtMs;
      if (m.ringUntilMs !== undefined && (m.state === 'invited' || m.state === 'ringing')) p.ringUntilMs = m.ringUntilMs;
      if (m.joinedAtMs !== undefined) p.joinedAtMs = m.joinedAtMs;
      if (m.leftAtMs !== undefined) p.leftAtMs = m.leftAtMs;
      return p;
    });
  }
  return snap;
}
