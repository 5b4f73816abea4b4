import { z } from 'zod';
import { END_REASONS } from '../calls/reasons.js';
import { SCREENED_REASONS } from '../calls/callPolicy.js';

const endedBy = z.enum(['caller', 'callee', 'system']);

/** One call in one user's history, from that user's point of view (src/history/callHistory.ts; docs/call-history.md). */
export const callHistoryEntry = z.object({
  callId: z.string(),
  direction: z.enum(['outgoing', 'incoming']).describe('outgoing: this user called; incoming: this user was called'),
  peerUserId: z.string().describe('the other party'),
  callerUserId: z.string(),
  calleeUserId: z.string(),
  video: z.boolean(),
  createdAtMs: z.number().int(),
  acceptedAtMs: z.number().int().nullable().describe('null: never answered'),
  answeredByInstallationId: z.string().nullable(),
  endedAtMs: z.number().int(),
  endReason: z.enum(END_REASONS).describe("the end reason as this user's devices were told it"),
  endedBy,
  missed: z.boolean().describe('a call to this user that nobody answered: it rang out, or the caller cancelled it'),
  missedCallAlert: z
    .boolean()
    .optional()
    .describe('in a missed record only: whether a missed-call alert for it was accepted by APNs or FCM for at least one of this user\'s installations (docs/protocol.md "Missed-call alerts")'),
  ringingMs: z.number().int().describe('from the invitation to the answer, or to the end when never answered'),
  talkMs: z.number().int().describe('from the answer to the end; 0 when never answered'),
  screened: z
    .enum(SCREENED_REASONS)
    .optional()
    .describe("in the callee's own record only: the callee's call policy stopped the call, which never rang (docs/call-policy.md)"),
  group: z
    .object({
      title: z.string(),
      outcome: z.enum(['joined', 'declined', 'missed', 'busy']).describe("this member's outcome"),
      userIds: z.array(z.string()).describe('the caller, then every member invited'),
    })
    .optional()
    .describe('a group call (docs/group-calls.md): peerUserId is the caller ("" in the caller\'s own record), calleeUserId ""; the times are this member\'s own'),
});

