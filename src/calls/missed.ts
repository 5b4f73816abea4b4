import type { CallChange } from './change.js';
import { participants, type Participant } from './participants.js';
import { canMiss, type EndReason } from './reasons.js';

/**
 * Who missed a call (docs/call-history.md "Missed calls"), one rule for both kinds: an invitee that
 * was rung and stopped ringing without joining and without declining or being busy, that is in
 * the member state `missed`. It rang out (its ring window, or its phone reported `unanswered`), or
 * the call ended while it still rang (the caller cancelled, the server API ended it, the call
 * ended by itself).
 *
 * `missedBy` names those a change made miss the call, each once: a `member` change's subjects that
 * rang out; at the end, the invitees still ringing then, and the callee of a one-to-one call,
 * whose ring-out is the call's end.
 */
export function missedBy(change: CallChange): Participant[] {
  const all = participants(change.call);
  if (change.kind === 'member') return all.filter((p) => p.state === 'missed' && change.subjects?.includes(p.userId));
  if (change.kind !== 'ended') return [];
  // A group member who rang out before the end was named by its own change (no `endedIn`).
  // A screened invitee was never rung: it did not miss the call, unless do not disturb silenced
  // it (docs/call-policy.md).
  return all.filter((p) => p.role === 'invitee' && p.state === 'missed' && canMiss(p.screened) && (p.endedIn !== undefined || change.call.kind === 'pair'));
}

/**
 * The reasons of the `call.ended` that a member's ringing installations get when the change makes
 * it miss the call (docs/protocol.md "End reasons"; src/events/audience.ts, groupAudience.ts): it
 * rang out (`unanswered`), the caller cancelled (`callerCancelled`; a caller whose own start
 * failed too), the app's backend ended the call through the server API (`remoteEnded` or
 * `failed`), or a group call's caller ended it for all while the member rang (`remoteEnded`).
 * A gateway marks such an end seen on a socket (src/push/missedCallSeen.ts).
 */
export const MISSED_END_REASONS: ReadonlySet<string> = new Set<EndReason>(['unanswered', 'callerCancelled', 'remoteEnded', 'failed']);
