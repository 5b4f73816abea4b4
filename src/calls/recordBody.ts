import { calleeField, type CallRecord } from './model.js';

/**
 * A call record as the server API returns it (docs/server-api.md "End a call"): the stored fields in a
 * fixed order, a one-to-one call's callee in `calleeUserId` ("" for a group call), and a group
 * call's title and members under `group`. The in-memory record tells the two kinds apart by
 * `kind` instead (src/calls/model.ts); this is its wire shape, kept as it was.
 */
export interface CallRecordBody {
  callId: string;
  state: CallRecord['state'];
  revision: string;
  callerUserId: string;
  callerInstallationId: string;
  callerDisplayName: string;
  callerHandle: string;
  calleeUserId: string;
  video: boolean;
  createdAtMs: number;
  expiresAtMs: number;
  answeredByInstallationId?: string;
  acceptedAtMs?: number;
  endedAtMs?: number;
  endReason?: CallRecord['endReason'];
  endedBy?: CallRecord['endedBy'];
  endedByInstallationId?: string;
  ringingAtMs?: number;
  ringingVia?: string;
  movedFromInstallationId?: string;
  group?: { title: string; members: Extract<CallRecord, { kind: 'group' }>['members'] };
}

export function callRecordBody(call: CallRecord): CallRecordBody {
  const pair = call.kind === 'pair' ? call : undefined;
  const body: CallRecordBody = {
    callId: call.callId,
    state: call.state,
    revision: call.revision,
    callerUserId: call.callerUserId,
    callerInstallationId: call.callerInstallationId,
    callerDisplayName: call.callerDisplayName,
    callerHandle: call.callerHandle,
    calleeUserId: calleeField(call),
    video: call.video,
    createdAtMs: call.createdAtMs,
    expiresAtMs: call.expiresAtMs,
  };
  if (pair?.answeredByInstallationId !== undefined) body.answeredByInstallationId = pair.answeredByInstallationId;
  if (call.acceptedAtMs !== undefined) body.acceptedAtMs = call.acceptedAtMs;
  if (call.endedAtMs !== undefined) body.endedAtMs = call.endedAtMs;
  if (call.endReason !== undefined) body.endReason = call.endReason;
  if (call.endedBy !== undefined) body.endedBy = call.endedBy;
  if (call.endedByInstallationId !== undefined) body.endedByInstallationId = call.endedByInstallationId;
  if (pair?.ringingAtMs !== undefined) body.ringingAtMs = pair.ringingAtMs;
  if (pair?.ringingVia !== undefined) body.ringingVia = pair.ringingVia;
  if (pair?.movedFromInstallationId !== undefined) body.movedFromInstallationId = pair.movedFromInstallationId;
  if (call.kind === 'group') body.group = { title: call.title, members: call.members };
  return body;
}
