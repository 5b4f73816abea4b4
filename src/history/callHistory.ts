import type { Redis, Cluster } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import { readIndexedPage, type IndexCursor, type RecordPage } from '../redis/indexedRecords.js';
import { memberEndReason, memberOutcome, wasAnswered, type CallRecord, type GroupCall, type Member, type PairCall } from '../calls/model.js';
import { canMiss, reasonForSide, type EndReason, type Side } from '../calls/reasons.js';
import type { CallChange } from '../calls/change.js';
import type { z } from 'zod';
import type { callHistoryEntry } from './schema.js';
import { DEFAULT_HISTORY_RETENTION_MS } from '../calls/retention.js';
import { participants } from '../calls/participants.js';
import { MissedCallAlertIndex } from './missedCallAlerts.js';

/**
 * Call history (docs/call-history.md): every ended call leaves a record. The script that ends it
 * writes the call's own record under the call's hash tag (lua/includes/endCallNow.lua); the relay
 * then files a copy, from each party's point of view, in that party's index in the user's slot
 * (lua/includes/indexCalls.lua, in the script that appends the party's events), together with the
 * party's list of active calls. Devices read their
 * own history (GET /v1/calls); the app's backend reads anyone's (the server API).
 */

/** One call in one user's history, from that user's point of view (its schema: ./schema.ts). */
export type HistoryEntry = z.infer<typeof callHistoryEntry>;

/**
 * What an ended call's record says about its timing and whether it was missed (webhooks share
 * it): never answered, and an invitee (a one-to-one call's callee) missed it (src/calls/missed.ts).
 */
export function callOutcome(call: CallRecord): { missed: boolean; ringingMs: number; talkMs: number; endedAtMs: number } {
  const endedAtMs = call.endedAtMs ?? call.createdAtMs;
  const answered = wasAnswered(call);
  const missed = !answered && participants(call).some((p) => p.role === 'invitee' && p.state === 'missed' && canMiss(p.screened));
  return {
    missed,
    ringingMs: Math.max(0, (call.acceptedAtMs ?? endedAtMs) - call.createdAtMs),
    talkMs: answered ? Math.max(0, endedAtMs - call.acceptedAtMs!) : 0,
    endedAtMs,
  };
}

/** The end reason each side was told (docs/api.md "End reasons"). */
export function reasonSeenBy(call: CallRecord, viewer: Side): EndReason {
  return reasonForSide(call.endReason ?? 'remoteEnded', call.endedBy ?? 'system', wasAnswered(call), viewer);
}

export function historyEntry(call: PairCall, viewer: Side): HistoryEntry {
  const o = callOutcome(call);
  return {
    callId: call.callId,
    direction: viewer === 'caller' ? 'outgoing' : 'incoming',
    peerUserId: viewer === 'caller' ? call.calleeUserId : call.callerUserId,
    callerUserId: call.callerUserId,
    calleeUserId: call.calleeUserId,
    video: call.video,
    createdAtMs: call.createdAtMs,
    acceptedAtMs: call.acceptedAtMs ?? null,
    answeredByInstallationId: call.answeredByInstallationId ?? null,
    endedAtMs: o.endedAtMs,
    endReason: reasonSeenBy(call, viewer),
    endedBy: call.endedBy ?? 'system',
    missed: viewer === 'callee' && o.missed,
    ringingMs: o.ringingMs,
    talkMs: o.talkMs,
    // Only the callee's own record says why the call did not ring (docs/call-policy.md).
    ...(viewer === 'callee' && call.screened ? { screened: call.screened } : {}),
  };
}

export interface HistorySettings extends KeySpace {
  /** CALL_RECORD_RETENTION_DAYS in ms; unset: DEFAULT_HISTORY_RETENTION_MS. */
  historyRetentionMs?: number;
}

/** A party's index work for one relay batch: its calls that started and ended, in outbox order. */
export type IndexOps = (['start', string, string, '', ''] | ['end', string, string, string, '1' | ''])[];

/** The index work of one change, by user (created: both parties' active sets; ended: both histories). */
export function indexOpsOf(change: CallChange, add: (userId: string, op: IndexOps[number]) => void): void {
  const { call } = change;
  if (call.kind === 'group') return groupIndexOps(change, call, add);
  if (change.kind === 'created') {
    const start: IndexOps[number] = ['start', call.callId, String(call.createdAtMs), '', ''];
    add(call.callerUserId, start);
    add(call.calleeUserId, start);
  } else if (change.kind === 'ended') {
    for (const side of ['caller', 'callee'] as const) {
      const entry = historyEntry(call, side);
      add(side === 'caller' ? call.callerUserId : call.calleeUserId, ['end', call.callId, String(entry.endedAtMs), JSON.stringify(entry), entry.missed ? '1' : '']);
    }
  }
}

/** One user's index work of one relay batch, with the history's retention (lua/appendEvents.lua files it). */
export interface UserIndexOps {
  ops: IndexOps;
  retentionMs: number;
}

/** How long call history is kept. */
export function historyRetentionOf(s: HistorySettings): number {
  return s.historyRetentionMs ?? DEFAULT_HISTORY_RETENTION_MS;
}

export class CallHistory {
  /** Which missed calls had a missed-call alert sent (its missed records' `missedCallAlert`). */
  readonly alerts: MissedCallAlertIndex;

  constructor(
    private readonly redis: Redis | Cluster,
    readonly settings: HistorySettings,
  ) {
    this.alerts = new MissedCallAlertIndex(redis, settings);
  }

  /** One page of `userId`'s history, newest first, after `cursor`; only missed calls when `missed`. */
  async read(userId: string, opts: { cursor?: IndexCursor | undefined; limit: number; missed: boolean }): Promise<RecordPage> {
    const s = this.settings;
    const index = opts.missed ? keys.userMissedIndex(s, userId) : keys.userHistoryIndex(s, userId);
    const page = await readIndexedPage(this.redis, index, { ...opts, minMs: Date.now() - historyRetentionOf(s) });
    return { ...page, records: await this.alerts.withAlertFlags(userId, page.records) };
  }

  /** The user's calls that have not ended, by the relay's index (the caller re-reads each call). */
  async activeCallIds(userId: string): Promise<string[]> {
    return this.redis.zrange(keys.userActiveCalls(this.settings, userId), 0, -1);
  }
}

/**
 * A group call's index work: each member's call starts when it is invited (the caller's with the
 * call) and every member gets its own record at the end (docs/call-history.md "Group calls").
 */
function groupIndexOps(change: CallChange, call: GroupCall, add: (userId: string, op: IndexOps[number]) => void): void {
  const members = call.members;
  const started = change.kind === 'created' ? members : change.kind === 'invited' ? members.filter((m) => change.subjects?.includes(m.userId)) : [];
  for (const m of started) add(m.userId, ['start', call.callId, String(m.invitedAtMs ?? call.createdAtMs), '', '']);
  if (change.kind !== 'ended') return;
  for (const m of members) {
    const entry = groupHistoryEntry(call, m);
    add(m.userId, ['end', call.callId, String(entry.endedAtMs), JSON.stringify(entry), entry.missed ? '1' : '']);
  }
}

/** One member's record of a group call: its own outcome and times. */
export function groupHistoryEntry(call: GroupCall, m: Member): HistoryEntry {
  const viewer: Side = m.userId === call.callerUserId ? 'caller' : 'callee';
  const o = callOutcome(call);
  const startedAtMs = m.invitedAtMs ?? call.createdAtMs;
  const joined = m.joinedAtMs !== undefined;
  const endedAtMs = m.leftAtMs ?? m.endedAtMs ?? o.endedAtMs;
  const outcome = memberOutcome(m);
  return {
    callId: call.callId,
    direction: viewer === 'caller' ? 'outgoing' : 'incoming',
    peerUserId: viewer === 'caller' ? '' : call.callerUserId,
    callerUserId: call.callerUserId,
    calleeUserId: '',
    video: call.video,
    createdAtMs: startedAtMs,
    acceptedAtMs: joined ? m.joinedAtMs! : null,
    answeredByInstallationId: joined ? (m.installationId ?? null) : null,
    endedAtMs,
    endReason: memberEndReason(call, m),
    endedBy: call.endedBy ?? 'system',
    missed: viewer === 'callee' && outcome === 'missed' && canMiss(m.screened),
    ringingMs: Math.max(0, (m.joinedAtMs ?? endedAtMs) - startedAtMs),
    talkMs: joined ? Math.max(0, endedAtMs - m.joinedAtMs!) : 0,
    ...(m.screened ? { screened: m.screened } : {}),
    group: { title: call.title, outcome, userIds: call.members.map((x) => x.userId) },
  };
}
