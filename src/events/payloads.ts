import type { CallRecord } from '../calls/model.js';
import type { EndReason } from '../calls/reasons.js';

/** The spec's network payloads, exactly: the invitation (2.5) and the signaling events (2.6). */

export interface InvitationPayload {
  schemaVersion: 1;
  type: 'call.invited';
  callId: string;
  displayName: string;
  handle: string;
  eventId: string;
  revision: string;
  issuedAtMs: number;
  expiresAtMs: number;
  video: boolean;
}

export interface AcceptedPayload {
  schemaVersion: 1;
  eventId: string;
  type: 'call.accepted';
  callId: string;
  revision: string;
  occurredAtMs: number;
  answeredByInstallationId: string;
}

export interface EndedPayload {
  schemaVersion: 1;
  eventId: string;
  type: 'call.ended';
  callId: string;
  revision: string;
  occurredAtMs: number;
  reason: EndReason;
}

export type EventPayload = InvitationPayload | AcceptedPayload | EndedPayload;

/**
 * Event IDs are derived from the change, so a relay that delivers a change twice delivers the
 * same IDs: `<callId>:<revision>:<audience tag>`.
 */
export function eventIdFor(call: CallRecord, tag: string): string {
  return `${call.callId}:${call.revision}:${tag}`;
}

export function invitationPayload(call: CallRecord, issuedAtMs: number): InvitationPayload {
  return {
    schemaVersion: 1,
    type: 'call.invited',
    callId: call.callId,
    displayName: call.callerDisplayName,
    handle: call.callerHandle,
    eventId: eventIdFor(call, 'invited'),
    revision: call.revision,
    issuedAtMs,
    expiresAtMs: call.expiresAtMs,
    video: call.video,
  };
}

export function acceptedPayload(call: CallRecord, occurredAtMs: number): AcceptedPayload {
  return {
    schemaVersion: 1,
    eventId: eventIdFor(call, 'accepted'),
    type: 'call.accepted',
    callId: call.callId,
    revision: call.revision,
    occurredAtMs,
    answeredByInstallationId: call.answeredByInstallationId ?? '',
  };
}

export function endedPayload(call: CallRecord, occurredAtMs: number, reason: EndReason, tag: string): EndedPayload {
  return {
    schemaVersion: 1,
    eventId: eventIdFor(call, tag),
    type: 'call.ended',
    callId: call.callId,
    revision: call.revision,
    occurredAtMs,
    reason,
  };
}
