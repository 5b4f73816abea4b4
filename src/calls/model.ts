import { END_REASONS, SCREENED_REASONS, reasonForSide, type EndReason, type EndedBy, type Side, type Screened } from './reasons.js';

/** A call's states (docs/protocol.md "States and transitions"). */
export const CALL_STATES = ['ringing', 'accepted', 'ended'] as const;
export type CallState = (typeof CALL_STATES)[number];

/** A group call member's state (docs/group-calls.md "Member states"). */
export const MEMBER_STATES = ['invited', 'ringing', 'joined', 'declined', 'missed', 'busy', 'left'] as const;
export type MemberState = (typeof MEMBER_STATES)[number];

/** One member of a group call as lua/includes/groupMembers.lua keeps it (the caller is the first). */
export interface Member {
  userId: string;
  state: MemberState;
  invitedAtMs?: number;
  ringUntilMs?: number;
  ringingAtMs?: number;
  installationId?: string;
  joinedAtMs?: number;
  leftAtMs?: number;
  endedAtMs?: number;
  /** The installation that declined (its other installations stop ringing). */
  byInstallationId?: string;
  /** How the invitation reached the installation that sent the member's first ringing receipt. */
  via?: string;
  /** The state a member removed by the app's backend was in (docs/server-api.md "Remove a participant"). */
  removedFrom?: MemberState;
  /** The state a joined member joined from. */
  joinedFrom?: MemberState;
  /** The installation a member in the call last moved the call from (docs/protocol.md "Moving a call"). */
  movedFrom?: string;
  /** When the call ended: what the member was doing then (ringing or in the call). */
  endedIn?: 'invited' | 'ringing' | 'joined';
  /** Never rung: the member's call policy stopped the call (docs/call-policy.md). */
  screened?: Screened;
}

/** The fields every call has, one-to-one or group (see lua/createCall.lua for the field names). */
interface CallFields {
  callId: string;
  state: CallState;
  revision: string;
  callerUserId: string;
  callerInstallationId: string;
  callerDisplayName: string;
  callerHandle: string;
  video: boolean;
  createdAtMs: number;
  expiresAtMs: number;
  acceptedAtMs?: number;
  endedAtMs?: number;
  endReason?: EndReason;
  endedBy?: EndedBy;
  endedByInstallationId?: string;
}

/**
 * A one-to-one call: a call of two members whose callee's part is kept in the call's own fields
 * (src/calls/participants.ts projects the two members from them).
 */
export interface PairCall extends CallFields {
  kind: 'pair';
  calleeUserId: string;
  answeredByInstallationId?: string;
  /** When the callee's first ringing receipt came, and how the invitation had reached it. */
  ringingAtMs?: number;
  ringingVia?: string;
  /** The installation the call's last move left (docs/protocol.md "Moving a call"). */
  movedFromInstallationId?: string;
  /** A one-to-one call the callee's call policy stopped (docs/call-policy.md): it never rings the callee. */
  screened?: Screened;
}

/** A group call (docs/group-calls.md): its title and its members, the caller first. */
export interface GroupCall extends CallFields {
  kind: 'group';
  title: string;
  members: Member[];
}

/** A call as stored (lua/includes/callRecord.lua): one of the two kinds. */
export type CallRecord = PairCall | GroupCall;

/**
 * `calleeUserId` as the bodies that every call shares carry it (snapshots, history records,
 * webhooks): a one-to-one call's callee, and "" for a group call, whose invitees are its
 * `participants` (docs/group-calls.md "Snapshot").
 */
export function calleeField(call: CallRecord): string {
  return call.kind === 'pair' ? call.calleeUserId : '';
}

/** The name an invitation shows: a group call's title when it has one, else the caller's name. */
export function shownName(call: CallRecord): string {
  return (call.kind === 'group' && call.title) || call.callerDisplayName;
}

/** The installation that answered a one-to-one call (a group call's joins are its members'). */
export function answeredBy(call: CallRecord): string | undefined {
  return call.kind === 'pair' ? call.answeredByInstallationId : undefined;
}

export class CorruptRecordError extends Error {
  override name = 'CorruptRecordError';
}

const STATES = new Set<string>(CALL_STATES);
const REASONS = new Set<string>(END_REASONS);
const ENDERS = new Set<string>(['caller', 'callee', 'system']);

function int(v: string | undefined, field: string): number {
  const n = Number(v);
  if (v === undefined || !Number.isSafeInteger(n)) throw new CorruptRecordError(`call field ${field} is not an integer`);
  return n;
}

function str(v: string | undefined, field: string): string {
  if (v === undefined) throw new CorruptRecordError(`call field ${field} is missing`);
  return v;
}

/** Parses an HGETALL-style flat array coming back from Redis; never trusts its shape. */
export function parseCallFields(flat: unknown): CallRecord {
  if (!Array.isArray(flat) || flat.length % 2 !== 0) throw new CorruptRecordError('call fields are not a flat list');
  const f: Record<string, string> = {};
  for (let i = 0; i < flat.length; i += 2) f[String(flat[i])] = String(flat[i + 1]);
  const state = str(f.state, 'state');
  if (!STATES.has(state)) throw new CorruptRecordError(`unknown call state ${state}`);
  const rec: CallFields = {
    callId: str(f.callId, 'callId'),
    state: state as CallState,
    revision: String(int(f.revision, 'revision')),
    callerUserId: str(f.callerUserId, 'callerUserId'),
    callerInstallationId: str(f.callerInstallationId, 'callerInstallationId'),
    callerDisplayName: str(f.callerDisplayName, 'callerDisplayName'),
    callerHandle: str(f.callerHandle, 'callerHandle'),
    video: f.video === '1',
    createdAtMs: int(f.createdAtMs, 'createdAtMs'),
    expiresAtMs: int(f.expiresAtMs, 'expiresAtMs'),
  };
  if (f.acceptedAtMs) rec.acceptedAtMs = int(f.acceptedAtMs, 'acceptedAtMs');
  if (f.endedAtMs) rec.endedAtMs = int(f.endedAtMs, 'endedAtMs');
  if (f.endReason) {
    if (!REASONS.has(f.endReason)) throw new CorruptRecordError(`unknown end reason ${f.endReason}`);
    rec.endReason = f.endReason as EndReason;
  }
  if (f.endedBy) {
    if (!ENDERS.has(f.endedBy)) throw new CorruptRecordError(`unknown endedBy ${f.endedBy}`);
    rec.endedBy = f.endedBy as EndedBy;
  }
  if (f.endedByInstallationId) rec.endedByInstallationId = f.endedByInstallationId;
  if (f.kind === 'group') return { ...rec, kind: 'group', title: f.title ?? '', members: parseMembers(f.members) };
  const pair: PairCall = { ...rec, kind: 'pair', calleeUserId: str(f.calleeUserId, 'calleeUserId') };
  if (f.answeredByInstallationId) pair.answeredByInstallationId = f.answeredByInstallationId;
  if (f.ringingAtMs) pair.ringingAtMs = int(f.ringingAtMs, 'ringingAtMs');
  if (f.ringingVia) pair.ringingVia = f.ringingVia;
  if (f.movedFromInstallationId) pair.movedFromInstallationId = f.movedFromInstallationId;
  if (f.screened) {
    if (!(SCREENED_REASONS as readonly string[]).includes(f.screened)) throw new CorruptRecordError(`unknown screened reason ${f.screened}`);
    pair.screened = f.screened as Screened;
  }
  return pair;
}

const MEMBER_STATE_SET = new Set<string>(MEMBER_STATES);
const MEMBER_TIMES = ['invitedAtMs', 'ringUntilMs', 'ringingAtMs', 'joinedAtMs', 'leftAtMs', 'endedAtMs'] as const;

function parseMembers(json: string | undefined): Member[] {
  let raw: unknown;
  try {
    raw = JSON.parse(json ?? '');
  } catch {
    throw new CorruptRecordError('group call members are not JSON');
  }
  if (!Array.isArray(raw) || raw.length === 0) throw new CorruptRecordError('group call members are not a list');
  return raw.map((r: Record<string, unknown>) => {
    if (typeof r?.userId !== 'string' || !MEMBER_STATE_SET.has(r.state as string)) throw new CorruptRecordError('a group call member is malformed');
    const m: Member = { userId: r.userId, state: r.state as MemberState };
    for (const t of MEMBER_TIMES) if (typeof r[t] === 'number') m[t] = r[t];
    if (typeof r.installationId === 'string') m.installationId = r.installationId;
    if (typeof r.byInstallationId === 'string') m.byInstallationId = r.byInstallationId;
    if (typeof r.via === 'string') m.via = r.via;
    if (typeof r.movedFrom === 'string') m.movedFrom = r.movedFrom;
    if (MEMBER_STATE_SET.has(r.joinedFrom as string)) m.joinedFrom = r.joinedFrom as MemberState;
    if (MEMBER_STATE_SET.has(r.removedFrom as string)) m.removedFrom = r.removedFrom as MemberState;
    if (r.endedIn === 'invited' || r.endedIn === 'ringing' || r.endedIn === 'joined') m.endedIn = r.endedIn;
    if ((SCREENED_REASONS as readonly string[]).includes(r.screened as string)) m.screened = r.screened as Screened;
    return m;
  });
}

/** How a group call went for a member (its history record, the outcome metric): joined at some point, declined, busy, or missed. */
export function memberOutcome(m: Member): 'joined' | 'declined' | 'busy' | 'missed' {
  if (m.joinedAtMs !== undefined) return 'joined';
  return m.state === 'declined' || m.state === 'busy' ? m.state : 'missed';
}

/** What a member's phone reported when it ended its own ringing, by the state it left the member in. */
export const STOPPED_BY_PHONE = { declined: 'declined', busy: 'busy', missed: 'unanswered' } as const;

/**
 * The end reason a member's devices were told, for its history record (docs/call-history.md
 * "Group calls"): the call's end, seen from the member's side, if it was ringing or in the call
 * then; else what ended its own part: its decline, busy or ring-out, its own leave
 * (`localHangup`), or its removal by the app's backend (`remoteEnded`).
 */
export function memberEndReason(call: CallRecord, m: Member): EndReason {
  const side: Side = m.userId === call.callerUserId ? 'caller' : 'callee';
  if (m.endedIn || (m.state !== 'left' && !(m.state in STOPPED_BY_PHONE))) {
    return reasonForSide(call.endReason ?? 'remoteEnded', call.endedBy ?? 'system', wasAnswered(call), side);
  }
  if (m.state === 'left') return m.removedFrom ? 'remoteEnded' : 'localHangup';
  return STOPPED_BY_PHONE[m.state as keyof typeof STOPPED_BY_PHONE];
}

/** The member `userId` of a group call, if it is one. */
export function memberOf(call: CallRecord, userId: string): Member | undefined {
  return call.kind === 'group' ? call.members.find((m) => m.userId === userId) : undefined;
}

/** A call as HGETALL returns its hash (an object); undefined when the hash is gone. */
export function callFromHash(hash: Record<string, string>): CallRecord | undefined {
  return hash.callId ? parseCallFields(Object.entries(hash).flat()) : undefined;
}

/** Whether the call was ever answered (for an ended call: it ended after an answer, not while ringing). */
export function wasAnswered(call: CallRecord): boolean {
  return call.acceptedAtMs !== undefined;
}
