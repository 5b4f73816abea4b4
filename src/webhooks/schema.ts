import { z } from 'zod';
import { END_REASONS } from '../calls/reasons.js';
import { MEMBER_STATES } from '../calls/model.js';
import { SCREENED_REASONS } from '../calls/callPolicy.js';
import { PUSH_TOKEN_KINDS } from '../push/kinds.js';

/**
 * The webhook request bodies (docs/webhooks.md "Events"): `{ type, timestamp, data }`. One schema
 * per event type, the source of the OpenAPI document's `webhooks` and of the types events.ts builds.
 */

const parties = {
  callId: z.string(),
  callerUserId: z.string(),
  callerInstallationId: z.string(),
  calleeUserId: z.string(),
  video: z.boolean(),
  createdAtMs: z.number().int(),
};

const envelope = <T extends string, D extends z.ZodType>(type: T, data: D) =>
  z.object({ type: z.literal(type), timestamp: z.string().describe('when it happened, ISO 8601 (UTC)'), data });

/** A group call's part of its call events (docs/group-calls.md): calleeUserId is then "". */
const group = z
  .object({
    title: z.string(),
    members: z
      .array(z.object({ userId: z.string(), state: z.enum(MEMBER_STATES), screened: z.enum(SCREENED_REASONS).optional().describe("the member's call policy stopped the call: it is never rung (docs/call-policy.md)") }))
      .describe('the caller first, then each member invited, with its state after the change'),
  })
  .optional()
  .describe('a group call only');

/** A one-to-one call the callee's call policy stopped (docs/call-policy.md): the callee was never rung. */
const screened = z.enum(SCREENED_REASONS).optional().describe("a one-to-one call only: the callee's call policy stopped the call, which never rang the callee (docs/call-policy.md)");

export const callCreatedData = z.object({ ...parties, expiresAtMs: z.number().int().describe('when it stops ringing unless answered'), screened, group });

export const callParticipantData = z.object({
  callId: z.string(),
  callerUserId: z.string(),
  userId: z.string().describe('the member whose state changed'),
  state: z.enum(MEMBER_STATES),
  installationId: z.string().nullable().describe('its installation in the call, once joined'),
  occurredAtMs: z.number().int(),
  screened: z.enum(SCREENED_REASONS).optional().describe("the member's call policy stopped the call: it is never rung (docs/call-policy.md)"),
});

export const callMovedData = z.object({
  callId: z.string(),
  callerUserId: z.string(),
  userId: z.string().describe('the member who moved the call to another of its installations'),
  fromInstallationId: z.string().describe('the installation it left (told `movedElsewhere`)'),
  toInstallationId: z.string().describe('the installation it is in the call from now'),
  occurredAtMs: z.number().int(),
});

export const callMissedData = z.object({
  callId: z.string(),
  callerUserId: z.string(),
  callerDisplayName: z.string().describe('the name the call showed (a group call: its title when it has one)'),
  callerHandle: z.string(),
  userId: z.string().describe('the invitee who missed the call'),
  video: z.boolean(),
  invitedAtMs: z.number().int().describe('when this user was rung'),
  occurredAtMs: z.number().int().describe('when it stopped ringing'),
});

export const callAcceptedData = z.object({
  ...parties,
  acceptedAtMs: z.number().int(),
  answeredByInstallationId: z.string().nullable().describe('the installation that answered (a group call: null; its first join is a call.participant)'),
  group,
});

export const callEndedData = z.object({
  ...parties,
  acceptedAtMs: z.number().int().nullable().describe('null: never answered'),
  answeredByInstallationId: z.string().nullable(),
  endedAtMs: z.number().int(),
  endedBy: z.enum(['caller', 'callee', 'system']).describe('system: the ring timeout, busy, or the server API'),
  endedByInstallationId: z.string().nullable(),
  reasons: z.object({ caller: z.enum(END_REASONS), callee: z.enum(END_REASONS) }).describe("the end reason as each side's devices were told it"),
  ringingMs: z.number().int().describe('from the invitation to the answer, or to the end when never answered'),
  talkMs: z.number().int().describe('from the answer to the end; 0 when never answered'),
  missed: z.boolean().describe('a missed call for the callee: it rang out, or the caller cancelled it, before any answer'),
  screened,
  group,
});

export const tokenRemovedData = z.object({
  userId: z.string(),
  installationId: z.string(),
  kind: z.enum(PUSH_TOKEN_KINDS),
  appId: z.string(),
  tokenSuffix: z.string().describe('the last 6 characters of the removed token'),
  reason: z.string().describe("the provider's reason, e.g. Unregistered or BadDeviceToken"),
  removedAtMs: z.number().int(),
});

export const webhookBodies = {
  'call.created': envelope('call.created', callCreatedData),
  'call.accepted': envelope('call.accepted', callAcceptedData),
  'call.ended': envelope('call.ended', callEndedData),
  'call.participant': envelope('call.participant', callParticipantData),
  'call.moved': envelope('call.moved', callMovedData),
  'call.missed': envelope('call.missed', callMissedData),
  'push.token_removed': envelope('push.token_removed', tokenRemovedData),
} as const;
