import type { CallRecord } from '../calls/model.js';
import type { EndReason } from '../calls/reasons.js';
import type { z } from 'zod';
import type { acceptedSchema, endedSchema, invitationSchema, renamedSchema } from './payloadSchemas.js';

/** Builders of the event payloads (schemas in payloadSchemas.ts; docs/protocol.md "Events"). */

export type InvitationPayload = z.infer<typeof invitationSchema>;
export type AcceptedPayload = z.infer<typeof acceptedSchema>;
export type EndedPayload = z.infer<typeof endedSchema>;
export type RenamedPayload = z.infer<typeof renamedSchema>;

export type EventPayload = InvitationPayload | AcceptedPayload | EndedPayload | RenamedPayload;

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

export function renamedPayload(call: CallRecord, occurredAtMs: number): RenamedPayload {
  return {
    schemaVersion: 1,
    eventId: eventIdFor(call, 'renamed'),
    type: 'call.renamed',
    callId: call.callId,
    revision: call.revision,
    occurredAtMs,
    displayName: call.callerDisplayName,
  };
}
