/**
 * End reasons and how each maps for each side of a call. The rule (docs/protocol.md "End reasons"): a reason is named from
 * the point of view of the side that reads it. The requesting phone reports only ends it decided
 * itself; the backend turns them into what the other side is told.
 */

/** Every end reason a snapshot or event can carry. */
export const END_REASONS = [
  'localHangup',
  'declined',
  'unanswered',
  'remoteEnded',
  'callerCancelled',
  'answeredElsewhere',
  'failed',
  'busy',
  'movedElsewhere',
] as const;
export type EndReason = (typeof END_REASONS)[number];

/**
 * Reasons accepted by POST /v1/calls/{id}/end. The last four are echoes of ends the backend
 * told the phone about; they are absorbed (they never change a call) so a client that reports
 * them back does no harm.
 */
export const REQUEST_END_REASONS = [
  'localHangup',
  'declined',
  'unanswered',
  'failed',
  'busy',
  'remoteEnded',
  'callerCancelled',
  'answeredElsewhere',
  'movedElsewhere',
] as const satisfies readonly EndReason[];
export type RequestEndReason = (typeof REQUEST_END_REASONS)[number];

export type Side = 'caller' | 'callee';
/** Who ended a call: one of its sides, or the server (ring timeout, busy). */
export type EndedBy = Side | 'system';

/**
 * The reason one side sees for a call that `endedBy` ended with `storedReason` (the reason the
 * ender reported, already normalised by endCall.lua), `wasAccepted` telling whether it had been
 * answered.
 */
export function reasonForSide(storedReason: EndReason, endedBy: EndedBy, wasAccepted: boolean, viewer: Side): EndReason {
  if (endedBy === 'system' || endedBy === viewer) return storedReason;
  if (wasAccepted) return 'remoteEnded';
  // Ended while ringing by the other side.
  if (endedBy === 'caller') return 'callerCancelled';
  // The callee's phone decided: declined, unanswered (its ring deadline), busy or failed.
  return storedReason === 'failed' ? 'declined' : storedReason;
}

/**
 * Why a call did not ring a callee: its call policy (docs/call-policy.md) blocked the caller, does
 * not allow it, or do not disturb silenced it or rejected it (`doNotDisturb`). The callee's
 * history and the webhooks say it; the caller never learns it.
 */
export const SCREENED_REASONS = ['blocked', 'notAllowed', 'silenced', 'doNotDisturb'] as const;
export type Screened = (typeof SCREENED_REASONS)[number];

/**
 * Whether a participant missed the call when it stopped ringing without an answer: one the policy
 * kept from ringing did not, except a call do not disturb silenced, which the user is meant to
 * find among their missed calls (docs/call-policy.md "Do not disturb").
 */
export const canMiss = (screened: Screened | undefined): boolean => screened === undefined || screened === 'silenced';
