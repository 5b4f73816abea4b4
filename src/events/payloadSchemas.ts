import { z } from 'zod';
import { END_REASONS } from '../calls/reasons.js';
import { MEMBER_STATES } from '../calls/model.js';

/**
 * The network payloads (docs/protocol.md "Events", "Push formats") as zod schemas: the single source of their TypeScript types
 * (src/events/payloads.ts) and of the JSON Schemas in docs/schemas/.
 */

const decimal = z.string().regex(/^[0-9]+$/);
const epochMs = z.number().int().nonnegative();

/** The invitation (`call.invited`), sent by push and over signaling (docs/protocol.md "Events"). */
export const invitationSchema = z
  .object({
    schemaVersion: z.literal(1),
    type: z.literal('call.invited'),
    callId: z.string().min(1),
    displayName: z.string().min(1).describe('1 to 256 UTF-8 bytes'),
    handle: z.string().min(1).describe('1 to 256 bytes, e.g. app:<userId>'),
    eventId: z.string().min(1),
    revision: decimal,
    issuedAtMs: epochMs,
    expiresAtMs: epochMs,
    video: z.boolean(),
  })
  .meta({ title: 'call.invited', description: 'The invitation: a call is ringing (docs/protocol.md "Events")' });

const eventCommon = {
  schemaVersion: z.literal(1),
  eventId: z.string().min(1),
  callId: z.string().min(1),
  revision: decimal,
  occurredAtMs: epochMs,
};

/** The callee accepted (docs/protocol.md "Events"). */
export const acceptedSchema = z
  .object({ ...eventCommon, type: z.literal('call.accepted'), answeredByInstallationId: z.string().min(1) })
  .meta({ title: 'call.accepted' });

/** The call ended, `reason` from the receiver's side (docs/protocol.md "End reasons"). */
export const endedSchema = z
  .object({ ...eventCommon, type: z.literal('call.ended'), reason: z.enum(END_REASONS) })
  .meta({ title: 'call.ended' });

/** The caller changed the name shown for a ringing or accepted call (docs/api.md "Rename"). */
export const renamedSchema = z
  .object({ ...eventCommon, type: z.literal('call.renamed'), displayName: z.string().min(1) })
  .meta({ title: 'call.renamed' });

/** An invitee's phone shows the call (its first ringing receipt; docs/group-calls.md "Ringing receipts"). */
export const ringingSchema = z
  .object({ ...eventCommon, type: z.literal('call.ringing'), userId: z.string().min(1).describe('the invitee whose phone rings') })
  .meta({ title: 'call.ringing' });

/** A group call member's state changed (docs/group-calls.md "Events"). */
export const participantSchema = z
  .object({
    ...eventCommon,
    type: z.literal('call.participant'),
    userId: z.string().min(1),
    state: z.enum(MEMBER_STATES),
    installationId: z.string().min(1).optional().describe('the installation in the call, once joined'),
  })
  .meta({ title: 'call.participant' });

/** A member in the call moved it to another of its installations (docs/protocol.md "Moving a call"). */
export const movedSchema = z
  .object({
    ...eventCommon,
    type: z.literal('call.moved'),
    userId: z.string().min(1).describe('the member who moved the call'),
    installationId: z.string().min(1).describe('the installation the member is in the call from now: a new media session is needed with it'),
  })
  .meta({ title: 'call.moved' });

/**
 * A member who was rung never answered (docs/protocol.md "Missed-call alerts"): the payload of the
 * missed-call alert, on iOS under the payload key of an alert push, on Android as a data message.
 * It is not an event-log entry: the log has the call's `call.ended`, the history its record.
 */
export const missedSchema = z
  .object({
    ...eventCommon,
    type: z.literal('call.missed'),
    userId: z.string().min(1).describe('the member who missed the call'),
    callerUserId: z.string().min(1),
    displayName: z.string().min(1).describe("the caller's name (a group call's title when it has one), as the invitation showed it"),
    handle: z.string().min(1).describe("the caller's handle, as in the invitation"),
    video: z.boolean(),
  })
  .meta({
    title: 'call.missed',
    description:
      'A missed call: the payload of a missed-call alert (docs/protocol.md "Missed-call alerts"), and the one event a call do not disturb silenced puts in its user\'s log, once it stopped ringing (docs/call-policy.md "Do not disturb")',
  });

/**
 * An in-call message (docs/api.md "In-call messages"): not a change of the call (no `revision`), and
 * not in the event log; delivered in a `message` signaling frame.
 */
export const messageSchema = z
  .object({
    schemaVersion: z.literal(1),
    eventId: z.string().min(1).describe('deduplicate by it: a message may be delivered more than once'),
    type: z.literal('call.message'),
    callId: z.string().min(1),
    occurredAtMs: epochMs,
    fromInstallationId: z.string().min(1),
    seq: z.number().int().min(1).describe("the sender's sequence number on this call (1, 2, ...): messages of one sender arrive in seq order"),
    payload: z.record(z.string(), z.unknown()).describe('the sender\'s payload, unchanged (at most 16 KiB of JSON)'),
  })
  .meta({ title: 'call.message', description: 'In-call message between the parties of a ringing or accepted call' });

export const eventSchema = z.discriminatedUnion('type', [invitationSchema, acceptedSchema, endedSchema, renamedSchema, ringingSchema, participantSchema, movedSchema]);

/** The iOS VoIP push body (docs/protocol.md "iOS VoIP invitation"). */
export const apnsBodySchema = z
  .object({ aps: z.object({}).strict(), callpayload: invitationSchema })
  .meta({ title: 'iOS VoIP push body' });

/** The iOS missed-call alert body (docs/protocol.md "Missed-call alerts"). */
export const apnsAlertBodySchema = z
  .object({
    aps: z
      .object({
        alert: z.object({ 'loc-key': z.string().min(1), 'loc-args': z.array(z.string()).length(1).describe("the caller's name") }).strict(),
        'thread-id': z.string().min(1).describe("the caller's userId: the alerts of one caller are grouped"),
      })
      .strict(),
    callpayload: missedSchema,
  })
  .meta({ title: 'iOS missed-call alert body' });

/** The Android data message (docs/protocol.md "Android invitation", "Android push signals"). `callpayload` is the payload serialised as JSON. */
export const fcmMessageSchema = z
  .object({
    message: z.object({
      token: z.string().min(1),
      android: z.object({
        priority: z.enum(['HIGH', 'NORMAL']),
        ttl: z.string().regex(/^[1-9][0-9]*s$/),
        collapse_key: z.string().min(1).optional().describe('the callId, on a missed-call alert only: a repeat replaces it'),
      }),
      data: z.object({ callpayload: z.string().describe('JSON text of call.invited, call.accepted, call.ended or call.missed') }),
    }),
  })
  .meta({ title: 'Android push message (FCM HTTP v1)' });
