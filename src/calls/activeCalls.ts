import type { CallChange } from './change.js';
import { wasAnswered } from './model.js';
import { participants, type Participant } from './participants.js';

/**
 * Busy detection: each user's relay state (the event log's meta hash, lua/appendEvents.lua) holds
 * an `active` marker naming the user's accepted call. The relay sets it for both parties when a
 * call is answered and clears it when that call ends, in the same write as the change's events.
 * It lags the calls a little, so the store only trusts a marker while its user is still in the
 * call it names (src/calls/store.ts stillIn); a missed clear can therefore never keep a user busy.
 */
export type MarkerOp = { op: 'set' | 'clear'; callId: string };

/**
 * The marker changes one change causes, by user, one rule for both kinds (src/calls/participants.ts):
 * a participant is busy from its join until it leaves or the call ends. A join also makes the
 * caller busy (in the call from the start, it is marked with the first join); a one-to-one answer
 * names no subjects: it joined both. At the end, those in the call then are cleared, and so is the
 * one whose leave ended it (a one-to-one party's hang-up, a group member's last leave).
 */
export function busyMarkerOps(change: CallChange): [userId: string, op: MarkerOp][] {
  const { kind, call, subjects } = change;
  const all = participants(call);
  const mark = (op: MarkerOp['op']) => (p: Participant): [string, MarkerOp] => [p.userId, { op, callId: call.callId }];
  if (kind === 'answered' || kind === 'joined') {
    const named = new Set([call.callerUserId, ...(subjects ?? all.map((p) => p.userId))]);
    return all.filter((p) => p.state === 'joined' && named.has(p.userId)).map(mark('set'));
  }
  if (kind === 'member') return all.filter((p) => p.state === 'left' && subjects?.includes(p.userId)).map(mark('clear'));
  if (kind === 'ended' && wasAnswered(call)) return all.filter((p) => p.endedIn === 'joined' || (p.state === 'left' && p.leftAtMs === call.endedAtMs)).map(mark('clear'));
  return [];
}
