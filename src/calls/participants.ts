import { STATE_BY_REASON } from './machine.js';
import { wasAnswered, type CallRecord, type Member, type PairCall } from './model.js';
import type { Side } from './reasons.js';

/**
 * Every call's participants, the caller first: a group call's members as kept, and a one-to-one
 * call's two, projected from its fields as lua/includes/groupMembers.lua callMembers projects them
 * for the call machine (docs/protocol.md "The call machine"). Code that asks who is in a call,
 * ringing or out reads this instead of telling the two kinds apart.
 */
export interface Participant extends Member {
  role: 'caller' | 'invitee';
}

export function participants(call: CallRecord): readonly Participant[] {
  const kept = projected.get(call);
  if (kept && kept.revision === call.revision && kept.state === call.state) return kept.list;
  const list = call.kind === 'group' ? call.members.map((m, i): Participant => ({ ...m, role: i === 0 ? 'caller' : 'invitee' })) : [pairCaller(call), pairCallee(call)];
  projected.set(call, { revision: call.revision, state: call.state, list });
  return list;
}

/**
 * Each call record's participants, projected once: a relayed change asks for them from its
 * audience, pushes, webhooks, history and missed calls. Kept by the record itself (a record read
 * again is another object), and checked against its revision and state in case one is changed in
 * place. Read-only: callers filter and map, never change a participant.
 */
const projected = new WeakMap<CallRecord, { revision: string; state: string; list: readonly Participant[] }>();

/** The one-to-one caller: in the call from its calling installation until the end. */
function pairCaller(call: PairCall): Participant {
  const caller: Participant = { role: 'caller', userId: call.callerUserId, state: 'joined', installationId: call.callerInstallationId, joinedAtMs: call.createdAtMs };
  return call.state === 'ended' ? { ...caller, state: 'left', leftAtMs: call.endedAtMs, endedIn: 'joined' } : caller;
}

/**
 * The one-to-one callee: ringing (with a receipt or not) until the answer, in the call from the
 * answering installation after it, and out once the call ended: `left` after an answer; declined,
 * busy or missed by what its phone reported when it ended the ringing; `busy` when it was never
 * rung; else it was still ringing at the end (a cancel, a ring timeout, the server API): missed.
 */
function pairCallee(call: PairCall): Participant {
  const callee: Participant = { role: 'invitee', userId: call.calleeUserId, state: 'invited', invitedAtMs: call.createdAtMs };
  if (call.screened) callee.screened = call.screened;
  const ringing = call.ringingAtMs !== undefined ? 'ringing' : 'invited';
  if (call.ringingAtMs !== undefined) callee.ringingAtMs = call.ringingAtMs;
  if (call.ringingVia !== undefined) callee.via = call.ringingVia;
  if (call.state === 'ringing') return { ...callee, state: ringing, ringUntilMs: call.expiresAtMs };
  const joined = { installationId: call.answeredByInstallationId, joinedAtMs: call.acceptedAtMs };
  if (call.state === 'accepted') return { ...callee, ...joined, state: 'joined' };
  if (wasAnswered(call)) return { ...callee, ...joined, state: 'left', leftAtMs: call.endedAtMs, ...(call.endedBy === 'callee' ? {} : { endedIn: 'joined' as const }) };
  if (call.endedBy === 'callee') return { ...callee, state: STATE_BY_REASON[call.endReason ?? ''] ?? 'declined', endedAtMs: call.endedAtMs, byInstallationId: call.endedByInstallationId };
  if (call.endReason === 'busy') return { ...callee, state: 'busy', endedAtMs: call.endedAtMs };
  return { ...callee, state: 'missed', endedAtMs: call.endedAtMs, endedIn: ringing };
}

/** The participants a call policy kept out (docs/call-policy.md): nothing of the call reaches them but their history. */
export function screenedUserIds(call: CallRecord): Set<string> {
  return new Set(participants(call).filter((p) => p.screened).map((p) => p.userId));
}

/** The participant `userId`, if it is one. */
export function participantOf(call: CallRecord, userId: string): Participant | undefined {
  return participants(call).find((p) => p.userId === userId);
}

/**
 * The installation of `userId` that is in the call: its joined installation (a one-to-one call's
 * calling or answering one) while the call is accepted; none while ringing or after the end. The
 * call machine decides the same (docs/protocol.md "The call machine": `sameInstallation`).
 */
export function inCallInstallation(call: CallRecord, userId: string): string | undefined {
  if (call.state !== 'accepted') return undefined;
  const p = participantOf(call, userId);
  return p?.state === 'joined' ? p.installationId : undefined;
}

/** The installation `userId`'s last move of the call left (docs/protocol.md "Moving a call"). */
export function movedFrom(call: CallRecord, userId: string): string | undefined {
  return call.kind === 'group' ? participantOf(call, userId)?.movedFrom : call.movedFromInstallationId;
}

/** The side a user is on: the caller's, or (every invitee of a group call too) the callee's. */
export function sideOf(call: CallRecord, userId: string): Side | undefined {
  const p = participantOf(call, userId);
  return p && (p.role === 'caller' ? 'caller' : 'callee');
}
