import { END_REASONS, type EndReason, type EndedBy, type Side } from './reasons.js';

export type CallState = 'ringing' | 'accepted' | 'ended';

/** A call as stored in its Redis hash (see lua/createCall.lua for the field names). */
export interface CallRecord {
  callId: string;
  state: CallState;
  revision: string;
  callerUserId: string;
  callerInstallationId: string;
  callerDisplayName: string;
  callerHandle: string;
  calleeUserId: string;
  video: boolean;
  createdAtMs: number;
  expiresAtMs: number;
  answeredByInstallationId?: string;
  acceptedAtMs?: number;
  endedAtMs?: number;
  endReason?: EndReason;
  endedBy?: EndedBy;
  endedByInstallationId?: string;
}

export class CorruptRecordError extends Error {
  override name = 'CorruptRecordError';
}

const STATES = new Set<string>(['ringing', 'accepted', 'ended']);
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
  const rec: CallRecord = {
    callId: str(f.callId, 'callId'),
    state: state as CallState,
    revision: String(int(f.revision, 'revision')),
    callerUserId: str(f.callerUserId, 'callerUserId'),
    callerInstallationId: str(f.callerInstallationId, 'callerInstallationId'),
    callerDisplayName: str(f.callerDisplayName, 'callerDisplayName'),
    callerHandle: str(f.callerHandle, 'callerHandle'),
    calleeUserId: str(f.calleeUserId, 'calleeUserId'),
    video: f.video === '1',
    createdAtMs: int(f.createdAtMs, 'createdAtMs'),
    expiresAtMs: int(f.expiresAtMs, 'expiresAtMs'),
  };
  if (f.answeredByInstallationId) rec.answeredByInstallationId = f.answeredByInstallationId;
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
  return rec;
}

/** A call as HGETALL returns its hash (an object); undefined when the hash is gone. */
export function callFromHash(hash: Record<string, string>): CallRecord | undefined {
  return hash.callId ? parseCallFields(Object.entries(hash).flat()) : undefined;
}

/** Whether the call was ever answered (for an ended call: it ended after an answer, not while ringing). */
export function wasAnswered(call: CallRecord): boolean {
  return call.acceptedAtMs !== undefined;
}

/**
 * The installation of `side` that is in the call: the caller's calling installation, or the one
 * that answered; none while ringing or after an end. lua/endCall.lua applies the same rule inside
 * its script (who may hang up an accepted call), where it must be decided atomically.
 */
export function inCallInstallation(call: CallRecord, side: Side): string | undefined {
  if (call.state !== 'accepted') return undefined;
  return side === 'caller' ? call.callerInstallationId : call.answeredByInstallationId;
}

export function sideOf(call: CallRecord, userId: string): Side | undefined {
  if (userId === call.callerUserId) return 'caller';
  if (userId === call.calleeUserId) return 'callee';
  return undefined;
}
