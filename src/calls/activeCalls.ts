import type { CallChange } from './change.js';
import { wasAnswered } from './model.js';

/**
 * Busy detection: each user's relay state (the event log's meta hash, lua/appendEvents.lua) holds
 * an `active` marker naming the user's accepted call. The relay sets it for both parties when a
 * call is answered and clears it when that call ends, in the same write as the change's events.
 * It lags the calls a little, so the store only trusts a marker while its user is still in the
 * call it names (src/calls/store.ts stillIn); a missed clear can therefore never keep a user busy.
 */
export type MarkerOp = { op: 'set' | 'clear'; callId: string };

/** The marker changes one change causes, by user. */
export function busyMarkerOps(change: CallChange): [userId: string, op: MarkerOp][] {
  const { kind, call } = change;
  if (call.group) return groupMarkerOps(change);
  const parties = [call.callerUserId, call.calleeUserId];
  if (kind === 'answered') return parties.map((u) => [u, { op: 'set', callId: call.callId }]);
  if (kind === 'ended' && wasAnswered(call)) return parties.map((u) => [u, { op: 'clear', callId: call.callId }]);
  return [];
}

/** A group call: a member is busy from its join (the caller from the first) until it leaves or the call ends. */
function groupMarkerOps({ kind, call, subjects = [] }: CallChange): [userId: string, op: MarkerOp][] {
  const members = call.group!.members;
  const set = (u: string): [string, MarkerOp] => [u, { op: 'set', callId: call.callId }];
  const clear = (u: string): [string, MarkerOp] => [u, { op: 'clear', callId: call.callId }];
  if (kind === 'joined') return [...new Set([call.callerUserId, ...subjects])].filter((u) => members.some((m) => m.userId === u && m.state === 'joined')).map(set);
  if (kind === 'member') return subjects.filter((u) => members.some((m) => m.userId === u && m.state === 'left')).map(clear);
  if (kind === 'ended' && wasAnswered(call)) return members.filter((m) => m.endedIn === 'joined').map((m) => clear(m.userId));
  return [];
}
