import { z } from 'zod';
import { MESSAGE_PAYLOAD_MAX_BYTES } from '../config/messageLimits.js';
import { IOS_ENVIRONMENTS, PUSH_TOKEN_KINDS } from '../push/kinds.js';
import { REQUEST_END_REASONS, END_REASONS } from '../calls/reasons.js';
import { MEMBER_STATES } from '../calls/model.js';
import { ID_PATTERN } from '../auth/principal.js';
import { callHistoryEntry } from '../history/schema.js';

/**
 * Every request and response body, once. These zod schemas validate requests, give the
 * TypeScript types, and generate the OpenAPI and JSON Schema documents.
 */

/** callId, operationId: opaque IDs safe in URLs and keys (a UUID fits). */
export const OPAQUE_ID_PATTERN = /^[A-Za-z0-9._~:-]{1,128}$/;
export const OPAQUE_ID_RULE = 'must be 1 to 128 characters of A-Z a-z 0-9 . _ ~ : -';
export const opaqueId = z.string().regex(OPAQUE_ID_PATTERN, OPAQUE_ID_RULE);

/** userId, installationId: 1 to 128 characters, no control characters or braces (as in tokens). */
export const principalId = z.string().regex(ID_PATTERN, 'must be 1 to 128 characters without control characters or braces');

export const decimalRevision = z.string().regex(/^[1-9][0-9]{0,17}$/, 'must be a positive decimal string');

/**
 * A one-to-one call's create body (POST /v1/calls). A `title` is refused, not ignored: the callee
 * sees the caller's name, and a title that silently went nowhere would look like a bug in the app
 * (docs/api.md "Errors").
 */
export const oneToOneCallBody = z.object({
  callId: opaqueId,
  calleeUserId: principalId,
  operationId: opaqueId,
  video: z.boolean().default(false),
  title: z.undefined({ error: 'only a group call (calleeUserIds) has a title; a one-to-one call shows the caller\'s name' }).optional(),
});

/** A group call's create body (POST /v1/calls with calleeUserIds; docs/group-calls.md). */
export const groupCallBody = z
  .object({
    callId: opaqueId,
    calleeUserIds: z.array(principalId).min(1, 'must list at least one user').describe('the users to ring, 1 to GROUP_CALL_MAX_MEMBERS, distinct, without yourself'),
    title: z.string().trim().min(1, 'must not be empty').max(1024, 'must be at most 1024 characters (it is cut to 256 UTF-8 bytes)').optional().describe("the call's title: the invitation's displayName"),
    operationId: opaqueId,
    video: z.boolean().default(false),
    calleeUserId: z.undefined({ error: 'give either calleeUserId (a one-to-one call) or calleeUserIds (a group call), not both' }).optional(),
  })
  .superRefine((b, ctx) => {
    if (new Set(b.calleeUserIds).size !== b.calleeUserIds.length) ctx.addIssue({ code: 'custom', path: ['calleeUserIds'], message: 'must not list a user twice' });
  });

/**
 * POST /v1/calls: a group call's body when it has `calleeUserIds`, else a one-to-one call's
 * (whose errors, a missing calleeUserId among them, stay as they always were).
 */
export const createCallBody = z.unknown().transform((value, ctx): z.output<typeof oneToOneCallBody> | z.output<typeof groupCallBody> => {
  const groupBody = typeof value === 'object' && value !== null && 'calleeUserIds' in value;
  const parsed = (groupBody ? groupCallBody : oneToOneCallBody).safeParse(value);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues) ctx.addIssue({ ...issue, code: 'custom', input: value });
  return z.NEVER;
});

/** Users to ring into a group call (docs/group-calls.md "Inviting more"). */
export const inviteBody = z
  .object({
    operationId: opaqueId,
    userIds: z.array(principalId).min(1, 'must list at least one user').describe('distinct, without yourself'),
  })
  .superRefine((b, ctx) => {
    if (new Set(b.userIds).size !== b.userIds.length) ctx.addIssue({ code: 'custom', path: ['userIds'], message: 'must not list a user twice' });
  });

/** A ringing receipt: this installation shows the incoming call (docs/group-calls.md "Ringing receipts"). */
export const ringingBody = z.object({
  operationId: opaqueId,
  via: z.enum(['socket', 'apns', 'fcm']).describe('how the invitation reached this installation: over signaling, an iOS VoIP push or an Android data message'),
});

export const answerCallBody = z.object({
  operationId: opaqueId,
  installationId: principalId,
  expectedRevision: decimalRevision.optional(),
});

/** A move: this installation claims the accepted call (docs/protocol.md "Moving a call"). */
export const moveCallBody = z.object({
  operationId: opaqueId,
  installationId: principalId,
  expectedRevision: decimalRevision.describe('the revision this installation saw; two installations that move at once saw the same one, and the second gets 409 `revision_conflict`'),
});

export const endCallBody = z.object({
  operationId: opaqueId,
  reason: z.enum(REQUEST_END_REASONS),
  forAll: z.boolean().optional().describe("a group call's caller: end it for everyone instead of leaving (docs/group-calls.md)"),
});

export const renameCallBody = z.object({
  operationId: opaqueId,
  displayName: z.string().trim().min(1, 'must not be empty').max(1024, 'must be at most 1024 characters (it is cut to 256 UTF-8 bytes)'),
});


export const sendMessageBody = z.object({
  operationId: opaqueId,
  payload: z
    .record(z.string(), z.unknown())
    .describe(`an opaque JSON object of at most ${MESSAGE_PAYLOAD_MAX_BYTES} bytes as JSON text, delivered unchanged (e.g. an SDP offer or an ICE candidate)`),
});

export const messageSent = z.object({
  eventId: z.string(),
  callId: z.string(),
  seq: z.number().int().describe("this sender's sequence number on this call, from 1"),
  occurredAtMs: z.number().int(),
});

export const mediaSessionBody = z.object({
  operationId: opaqueId.optional(),
});

export const pushTokenKind = z.enum(PUSH_TOKEN_KINDS);
export const iosEnvironment = z.enum(IOS_ENVIRONMENTS);

export const pushTokenBody = z.object({
  token: z.string().regex(/^[\x21-\x7e]{8,4096}$/, 'must be 8 to 4096 printable ASCII characters'),
  appId: z.string().regex(/^[A-Za-z0-9._-]{1,255}$/, 'must be an app bundle ID or package name'),
  iosEnvironment: iosEnvironment.optional(),
});

export const pushTokenRegistration = z.object({
  installationId: z.string(),
  kind: pushTokenKind,
  appId: z.string(),
  iosEnvironment: iosEnvironment.optional(),
  tokenSuffix: z.string(),
  updatedAtMs: z.number().int(),
});

export const callSnapshot = z.object({
  schemaVersion: z.literal(1),
  callId: z.string(),
  revision: z.string(),
  state: z.enum(['ringing', 'accepted', 'ended']),
  caller: z.object({ userId: z.string(), displayName: z.string(), handle: z.string() }),
  calleeUserId: z.string(),
  createdAtMs: z.number().int(),
  expiresAtMs: z.number().int(),
  video: z.boolean(),
  answeredByInstallationId: z.string().optional(),
  acceptedAtMs: z.number().int().optional(),
  endedAtMs: z.number().int().optional(),
  endReason: z.enum(END_REASONS).optional(),
  title: z.string().optional().describe('a group call\'s title ("" when it has none); absent on a one-to-one call'),
  participants: z
    .array(
      z.object({
        userId: z.string(),
        state: z.enum(MEMBER_STATES),
        installationId: z.string().optional().describe('the installation in the call (joined), or that was (left)'),
        invitedAtMs: z.number().int().optional(),
        ringUntilMs: z.number().int().optional().describe('while invited or ringing: when its ring window closes'),
        joinedAtMs: z.number().int().optional(),
        leftAtMs: z.number().int().optional(),
      }),
    )
    .optional()
    .describe('a group call only (docs/group-calls.md): the caller first, then every member in invitation order; calleeUserId is then ""'),
  presence: z
    .record(z.string(), z.object({ muted: z.boolean().optional(), speaking: z.boolean().optional(), handRaised: z.boolean().optional(), video: z.boolean().optional() }))
    .optional()
    .describe('GET /v1/calls/{id} of a call in progress: by userId, the live signal state each member in the call has sent since it joined (docs/signaling.md "Live signals"); a member who left has none; absent when no member in the call has sent one'),
});

export const mediaSession = z.object({
  iceServers: z.array(z.object({ urls: z.array(z.string()), username: z.string().optional(), credential: z.string().optional() })),
  expiresAtMs: z.number().int(),
  sfu: z
    .object({
      kind: z.enum(['janus', 'livekit']).describe('which client protocol `url` speaks: Janus (its VideoRoom plugin) or LiveKit'),
      url: z.string().describe('where the client connects (Janus: its WebSocket or HTTP transport; LiveKit: the server URL)'),
      room: z.union([z.number().int(), z.string()]).describe('Janus: the VideoRoom room number; LiveKit: the room name (the callId)'),
      token: z.string().describe('this installation\'s credential for this room only, valid until `expiresAtMs` (Janus: the session `token` and the VideoRoom join `token`; LiveKit: the access token)'),
      participantId: z
        .number()
        .int()
        .optional()
        .describe('Janus: the publisher `id` to join with; the server kicks it from the room when the installation leaves the call'),
    })
    .optional()
    .describe('present for a group call whenever an SFU is configured, and for a one-to-one call with MEDIA_MODE=sfu (docs/api.md "Media session")'),
});

export const problem = z.object({
  type: z.string(),
  title: z.string(),
  status: z.number().int(),
  detail: z.string(),
  code: z.string(),
  snapshot: callSnapshot.optional(),
});

export const callEventsPage = z.object({
  events: z.array(z.record(z.string(), z.unknown())).describe('call.invited, call.accepted, call.ended and call.renamed payloads (docs/schemas/)'),
  nextCursor: z.string(),
  hasMore: z.boolean(),
  gap: z.object({ reason: z.enum(['trimmed', 'reset']) }).optional(),
});

export const callMessagesPage = z.object({
  messages: z.array(z.record(z.string(), z.unknown())).describe('call.message events for this installation, in send order'),
});

/* ---- Call history (docs/call-history.md) ---- */

export { callHistoryEntry };

export const callHistoryPage = z.object({
  calls: z.array(callHistoryEntry).describe('newest first (by endedAtMs)'),
  nextCursor: z.string().nullable().describe('pass as `cursor` for the next page; null on the last page'),
});

/* ---- Server API (docs/server-api.md) ---- */

/** Reasons the app's backend may end a call with; both sides are told it. */
export const SERVER_END_REASONS = ['remoteEnded', 'failed'] as const;

export const serverEndCallBody = z.object({
  reason: z.enum(SERVER_END_REASONS).default('remoteEnded').describe('the reason both sides are told (default remoteEnded)'),
});

/** A call as the app's backend sees it: every stored field, neither side's view. */
export const serverCall = z.object({
  callId: z.string(),
  state: z.enum(['ringing', 'accepted', 'ended']),
  revision: z.string(),
  callerUserId: z.string(),
  callerInstallationId: z.string(),
  callerDisplayName: z.string(),
  callerHandle: z.string(),
  calleeUserId: z.string(),
  video: z.boolean(),
  createdAtMs: z.number().int(),
  expiresAtMs: z.number().int(),
  answeredByInstallationId: z.string().optional(),
  acceptedAtMs: z.number().int().optional(),
  endedAtMs: z.number().int().optional(),
  endReason: z.enum(END_REASONS).optional(),
  endedBy: z.enum(['caller', 'callee', 'system']).optional(),
  endedByInstallationId: z.string().optional(),
  ringingAtMs: z.number().int().optional().describe("a one-to-one call: the callee's first ringing receipt"),
  ringingVia: z.string().optional(),
  group: z
    .object({
      title: z.string(),
      members: z.array(z.object({ userId: z.string(), state: z.enum(MEMBER_STATES) }).catchall(z.unknown())).describe('the caller first, then each member invited, as stored'),
    })
    .optional()
    .describe('a group call (docs/group-calls.md)'),
});

export const serverEndCallResult = z.object({
  ended: z.boolean().describe('true: this request ended it; false: it had already ended'),
  call: serverCall,
});

export const serverRemoveParticipantResult = z.object({
  removed: z.boolean().describe('true: this request removed the member; false: it was already out, or the call has ended'),
  call: serverCall,
});

export const activeCalls = z.object({ calls: z.array(serverCall) });

export const signOutResult = z.object({ installationId: z.string(), pushTokensRemoved: z.number().int() });

export const erasureResult = z.object({
  userId: z.string(),
  callsEnded: z.number().int().describe('calls in progress this erasure ended first'),
  keysDeleted: z.number().int(),
});

export const webhookEndpointState = z.object({
  id: z.string(),
  url: z.string(),
  events: z.array(z.string()),
  disabled: z.object({ atMs: z.number().int(), status: z.number().int() }).nullable().describe('set when a 410 answer disabled it'),
});

export const webhookEndpoints = z.object({ endpoints: z.array(webhookEndpointState) });

export const deadLetter = z.object({
  id: z.string().describe('the webhook-id: one dead letter per event and endpoint'),
  endpointId: z.string(),
  webhookId: z.string(),
  type: z.string(),
  body: z.string().describe('the request body as it was sent'),
  attempts: z.number().int(),
  lastStatus: z.number().int().nullable(),
  lastError: z.string().nullable(),
  failedAtMs: z.number().int(),
});

export const deadLettersPage = z.object({
  deadLetters: z.array(deadLetter).describe('newest first'),
  nextCursor: z.string().nullable(),
});
