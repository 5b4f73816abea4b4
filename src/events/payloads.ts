import { shownName, type CallRecord, type Member, type PairCall } from '../calls/model.js';
import type { EndReason } from '../calls/reasons.js';
import type { z } from 'zod';
import type { acceptedSchema, endedSchema, invitationSchema, missedSchema, movedSchema, participantSchema, renamedSchema, ringingSchema } from './payloadSchemas.js';

/** Builders of the event payloads (schemas in payloadSchemas.ts; docs/protocol.md "Events"). */

export type InvitationPayload = z.infer<typeof invitationSchema>;
export type AcceptedPayload = z.infer<typeof acceptedSchema>;
export type EndedPayload = z.infer<typeof endedSchema>;
export type RenamedPayload = z.infer<typeof renamedSchema>;
export type RingingPayload = z.infer<typeof ringingSchema>;
export type ParticipantPayload = z.infer<typeof participantSchema>;
export type MovedPayload = z.infer<typeof movedSchema>;
export type MissedPayload = z.infer<typeof missedSchema>;

export type EventPayload = InvitationPayload | AcceptedPayload | EndedPayload | RenamedPayload | RingingPayload | ParticipantPayload | MovedPayload | MissedPayload;

/**
 * Event IDs are derived from the change, so a relay that delivers a change twice delivers the
 * same IDs: `<callId>:<revision>:<audience tag>`.
 */
export function eventIdFor(call: CallRecord, tag: string): string {
  return `${call.callId}:${call.revision}:${tag}`;
}

/**
 * The invitation, the same for one-to-one and group calls; a group call's shows its title (when
 * it has one) as `displayName`, and the invitee's own ring window as `expiresAtMs`.
 */
export function invitationPayload(call: CallRecord, issuedAtMs: number, invitee?: Member): InvitationPayload {
  return {
    schemaVersion: 1,
    type: 'call.invited',
    callId: call.callId,
    displayName: shownName(call),
    handle: call.callerHandle,
    eventId: eventIdFor(call, 'invited'),
    revision: call.revision,
    issuedAtMs,
    expiresAtMs: invitee?.ringUntilMs ?? call.expiresAtMs,
    video: call.video,
  };
}

export function acceptedPayload(call: PairCall, occurredAtMs: number): AcceptedPayload {
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

export function ringingPayload(call: CallRecord, occurredAtMs: number, userId: string): RingingPayload {
  return { schemaVersion: 1, eventId: eventIdFor(call, `ringing.${userId}`), type: 'call.ringing', callId: call.callId, revision: call.revision, occurredAtMs, userId };
}

export function participantPayload(call: CallRecord, occurredAtMs: number, m: Member): ParticipantPayload {
  const p: ParticipantPayload = {
    schemaVersion: 1,
    eventId: eventIdFor(call, `participant.${m.userId}`),
    type: 'call.participant',
    callId: call.callId,
    revision: call.revision,
    occurredAtMs,
    userId: m.userId,
    state: m.state,
  };
  if (m.state === 'joined' && m.installationId) p.installationId = m.installationId;
  return p;
}

export function movedPayload(call: CallRecord, occurredAtMs: number, userId: string, installationId: string): MovedPayload {
  return { schemaVersion: 1, eventId: eventIdFor(call, `moved.${userId}`), type: 'call.moved', callId: call.callId, revision: call.revision, occurredAtMs, userId, installationId };
}

/** The missed-call alert's payload for one member (docs/protocol.md "Missed-call alerts"); its eventId is one per call and member. */
export function missedPayload(call: CallRecord, occurredAtMs: number, userId: string): MissedPayload {
  return {
    schemaVersion: 1,
    eventId: eventIdFor(call, `missed.${userId}`),
    type: 'call.missed',
    callId: call.callId,
    revision: call.revision,
    occurredAtMs,
    userId,
    callerUserId: call.callerUserId,
    displayName: shownName(call),
    handle: call.callerHandle,
    video: call.video,
  };
}
