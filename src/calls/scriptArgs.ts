import type { KeySpace } from '../redis/keys.js';
import { keys } from '../redis/keys.js';
import type { Topology } from '../redis/connection.js';
import type { PairCall } from './model.js';
import type { RequestEndReason } from './reasons.js';
import { retentionArg, type Retention } from './retention.js';
import { GROUP_CALL_MAX_MEMBERS_DEFAULT } from '../config/config.js';
import type { ScriptArgs, ScriptCall } from '../redis/scripts.js';
import { policyKeys, type Screened } from './callPolicy.js';

export type { ScriptCall } from '../redis/scripts.js';

/**
 * The keys and arguments of each call script (lua/*.lua): pure `xxxKeysArgs(input) → { keys, args }`
 * builders, one per script, that src/calls/store.ts runs.
 */

export interface StoreSettings extends KeySpace, Retention {
  ringTimeoutMs: number;
  operationTtlMs: number;
  /** When false, a call to a callee in an accepted call ends at once as `busy`. */
  callWaiting: boolean;
  /** What the caller of a call the callee's policy screened is shown (SCREENED_CALL_REPLY; docs/call-policy.md); unanswered when unset. */
  screenedReply?: 'unanswered' | 'busy';
  /** How new calls are stored (CALL_RECORD_FORMAT; lua/includes/callRecord.lua); string when unset. */
  callRecordFormat?: 'string' | 'hash';
  /** Members besides the caller a group call may hold (GROUP_CALL_MAX_MEMBERS; its default when unset). */
  maxGroupInvitees?: number;
  /** Renames one call may have (RENAMES_PER_CALL). */
  maxRenamesPerCall: number;
  /** In-call messages kept per call for recovery (default MESSAGES_KEPT_PER_CALL). */
  messagesKeptPerCall?: number;
  /** In-call messages per call and sender per MESSAGE_LIMIT_WINDOW_MS (RATE_CALL_MESSAGES_PER_10S); 0 or unset: no limit. */
  messagesPerWindow?: number;
}

/** docs/api.md "In-call messages": what a call keeps of its messages, and how long after the last one. */
export const MESSAGES_KEPT_PER_CALL = 256;
export const MESSAGES_TTL_MS = 3_600_000;
/** The window of the per-call-and-sender message limit (RATE_CALL_MESSAGES_PER_10S). */
export const MESSAGE_LIMIT_WINDOW_MS = 10_000;


/** What a create request stores of the call (the rest the script sets), and its operation. */
export type CreateInput = Pick<
  PairCall,
  'callId' | 'callerUserId' | 'callerInstallationId' | 'callerDisplayName' | 'callerHandle' | 'calleeUserId' | 'video'
> & { operationId: string; fingerprint: string };

/** The keys of every call-changing script: the call, the operation's record, the shard's outbox and ring index. */
function changeKeys(s: StoreSettings, callId: string, userId: string, operationId: string): string[] {
  return [keys.call(s, callId), keys.operation(s, callId, userId, operationId), keys.outboxForCall(s, callId), keys.ringingForCall(s, callId)];
}

/**
 * A request's keys, and on a single Redis the user's operationId binding after them: the script takes the binding itself (lua/includes/operationRecord.lua bindOperation), so
 * the request costs one round trip. On a cluster the binding lives in the user's slot, apart from
 * the call's keys, and CallStore binds first.
 */
function requestKeys(s: StoreSettings, callKeys: string[], userId: string, operationId: string, topology: Topology): string[] {
  return topology === 'single' ? [...callKeys, keys.operationBinding(s, userId, operationId)] : callKeys;
}

/** The keys of a request by a party of an existing call (answer, end, rename, invite, ringing). */
function userRequestKeys(s: StoreSettings, i: { callId: string; userId: string; operationId: string }, topology: Topology): string[] {
  return requestKeys(s, changeKeys(s, i.callId, i.userId, i.operationId), i.userId, i.operationId, topology);
}

/**
 * On a single Redis: the users' live channel template, with a NUL where the userId goes, so the
 * in-call message script publishes to the recipient's channel itself (lua/sendMessage.lua). On a
 * cluster that channel lives in another slot, and the relay publishes.
 */
export function liveChannelArg(s: KeySpace, topology: Topology): string {
  return topology === 'single' ? keys.liveChannel(s, '\0') : '';
}

/**
 * '1' on a single Redis: a change script publishes the change's early notice on its shard's early
 * channel (lua/includes/appendOutbox.lua, docs/signaling.md "Early events"). On a cluster, '': the
 * gateways subscribe per user there, and only the relay publishes.
 */
export function earlyNoticeArg(topology: Topology): string {
  return topology === 'single' ? '1' : '';
}

/**
 * `firstUse` (create, answer, end, on a cluster): the user's operationId binding was new, so the
 * script need not look for a stored outcome first; it looks only on the paths a concurrent replay
 * could have taken (lua/includes/operationRecord.lua). On a single Redis the
 * script binds and finds that out itself (requestKeys).
 */
export function createCallKeysArgs(
  s: StoreSettings,
  i: CreateInput,
  calleeBusy = false,
  firstUse = false,
  topology: Topology = 'cluster',
  limits: readonly Pick<CreateLimit, 'key' | 'rule'>[] = [],
  screened: Screened | '' = '',
): ScriptCall<'createCall'> {
  const c = createRequest(s, i, firstUse, topology, limits);
  // The callee's policy (docs/call-policy.md): on a single Redis its keys, after the others, for
  // the script to read; on a cluster the verdict CallStore read before it.
  const single = topology === 'single';
  return {
    keys: single ? [...c.keys, ...policyKeys(s, i.calleeUserId)] : c.keys,
    args: {
      ...c.args,
      calleeUserId: i.calleeUserId,
      busy: calleeBusy ? '1' : '0',
      policyAt: single ? String(c.keys.length + 1) : '',
      screened: single ? '' : screened,
      screenedReply: s.screenedReply ?? 'unanswered',
    },
  };
}

/**
 * A create's or an invite's rate limit (a counter of src/limits/rateLimiter.ts,
 * RedisRateLimiter.counter): on a single Redis the request's script hits it by its key and rule;
 * on a cluster CallStore calls `hit`.
 */
export interface CreateLimit {
  readonly key: string;
  readonly rule: { limit: number; windowMs: number };
  /** An invitee's limit names the invitee: a call its call policy screens does not count (docs/call-policy.md). */
  readonly invitee?: string;
  hit(): Promise<{ allowed: boolean; retryAfterMs: number }>;
}

/**
 * On a single Redis, a create's limits (the caller's creates, each invitee's invitations) and an
 * invite's (each invitee's) are hit by its script, as its first step
 * (lua/includes/createLimits.lua): their counters after the binding, and their rules as one
 * argument. On a cluster the counters live in other slots and
 * CallStore hits them apart: no keys, ''.
 */
function createLimitsKeysArg(limits: readonly Pick<CreateLimit, 'key' | 'rule' | 'invitee'>[], topology: Topology): { keys: string[]; arg: string } {
  if (topology !== 'single' || limits.length === 0) return { keys: [], arg: '' };
  return { keys: limits.map((l) => l.key), arg: JSON.stringify(limits.map((l) => (l.invitee === undefined ? [l.rule.limit, l.rule.windowMs] : [l.rule.limit, l.rule.windowMs, l.invitee]))) };
}

/**
 * The keys and arguments createCall.lua and createGroupCall.lua share (the caller's fields and
 * the request's settings); the limits' counters after the other keys.
 */
function createRequest(
  s: StoreSettings,
  i: Omit<CreateInput, 'calleeUserId'>,
  firstUse: boolean,
  topology: Topology,
  limits: readonly Pick<CreateLimit, 'key' | 'rule' | 'invitee'>[],
): { keys: string[]; args: Omit<ScriptArgs<'createCall'>, 'calleeUserId' | 'busy' | 'policyAt' | 'screened' | 'screenedReply'> } {
  const limited = createLimitsKeysArg(limits, topology);
  return {
    keys: [...requestKeys(s, changeKeys(s, i.callId, i.callerUserId, i.operationId), i.callerUserId, i.operationId, topology), ...limited.keys],
    args: {
      callId: i.callId,
      callerUserId: i.callerUserId,
      callerInstallationId: i.callerInstallationId,
      callerDisplayName: i.callerDisplayName,
      callerHandle: i.callerHandle,
      video: i.video ? '1' : '0',
      ringTimeoutMs: String(s.ringTimeoutMs),
      retention: retentionArg(s),
      operationTtlMs: String(s.operationTtlMs),
      fingerprint: i.fingerprint,
      firstUse: firstUse ? '1' : '0',
      earlyNotice: earlyNoticeArg(topology),
      limits: limited.arg,
      recordFormat: s.callRecordFormat === 'hash' ? 'hash' : '',
    },
  };
}

/** The arguments every change of an existing call takes after its own (src/redis/scripts.ts CHANGE_ARGS). */
function changeArgs(s: StoreSettings, fingerprint: string, topology: Topology) {
  return { retention: retentionArg(s), operationTtlMs: String(s.operationTtlMs), fingerprint, earlyNotice: earlyNoticeArg(topology) };
}

export interface RenameInput {
  callId: string;
  userId: string;
  displayName: string;
  operationId: string;
  fingerprint: string;
}

export function renameCallKeysArgs(s: StoreSettings, i: RenameInput, topology: Topology = 'cluster'): ScriptCall<'renameCall'> {
  return {
    keys: userRequestKeys(s, i, topology),
    args: { userId: i.userId, displayName: i.displayName, maxRenames: String(s.maxRenamesPerCall), ...changeArgs(s, i.fingerprint, topology) },
  };
}

export interface MessageInput {
  callId: string;
  userId: string;
  installationId: string;
  /** The event ID this operation gets if it is new (a replay keeps the first one). */
  eventId: string;
  /** The payload's JSON text (an object, already bounded). */
  payloadJson: string;
  operationId: string;
  fingerprint: string;
}

export function sendMessageKeysArgs(s: StoreSettings, i: MessageInput, topology: Topology): ScriptCall<'sendMessage'> {
  const callKeys = [
    ...changeKeys(s, i.callId, i.userId, i.operationId),
    keys.callMessages(s, i.callId),
    keys.callMessageSeqs(s, i.callId),
    keys.callMessageLimit(s, i.callId, i.userId),
  ];
  return {
    keys: requestKeys(s, callKeys, i.userId, i.operationId, topology),
    args: {
      userId: i.userId,
      installationId: i.installationId,
      eventId: i.eventId,
      payloadJson: i.payloadJson,
      retention: retentionArg(s),
      operationTtlMs: String(s.operationTtlMs),
      fingerprint: i.fingerprint,
      maxKept: String(s.messagesKeptPerCall ?? MESSAGES_KEPT_PER_CALL),
      messagesTtlMs: String(MESSAGES_TTL_MS),
      liveChannel: liveChannelArg(s, topology),
      limit: String(s.messagesPerWindow ?? 0),
      windowMs: String(MESSAGE_LIMIT_WINDOW_MS),
    },
  };
}

export function readMessagesKeysArgs(s: StoreSettings, callId: string, userId: string, installationId: string, afterSeq: number): ScriptCall<'readMessages'> {
  return { keys: [keys.call(s, callId), keys.callMessages(s, callId)], args: { userId, installationId, afterSeq: String(afterSeq) } };
}

export type MessageOutcome =
  | { kind: 'sent'; eventId: string; seq: number; occurredAtMs: number; replayed: boolean }
  | { kind: 'failure'; code: 'not_found' | 'forbidden' | 'idempotency_conflict' | 'call_not_active' | 'not_pair' }
  | { kind: 'limited'; retryAfterMs: number };

export interface AnswerInput {
  callId: string;
  userId: string;
  installationId: string;
  expectedRevision: string | undefined;
  operationId: string;
  fingerprint: string;
}

/** A move (lua/moveCall.lua) takes what an answer takes: the installation that claims the call. */
export type MoveInput = AnswerInput;

export function answerCallKeysArgs(s: StoreSettings, i: AnswerInput, firstUse = false, topology: Topology = 'cluster'): ScriptCall<'answerCall' | 'moveCall'> {
  return {
    keys: userRequestKeys(s, i, topology),
    args: {
      userId: i.userId,
      installationId: i.installationId,
      expectedRevision: i.expectedRevision ?? '',
      firstUse: firstUse ? '1' : '0',
      ...changeArgs(s, i.fingerprint, topology),
    },
  };
}

export interface EndInput {
  callId: string;
  userId: string;
  installationId: string;
  reason: RequestEndReason;
  /** A group call's caller ends it for everyone instead of leaving (docs/group-calls.md). */
  forAll?: boolean;
  operationId: string;
  fingerprint: string;
}

export function endCallKeysArgs(s: StoreSettings, i: EndInput, firstUse = false, topology: Topology = 'cluster'): ScriptCall<'endCall'> {
  return {
    keys: userRequestKeys(s, i, topology),
    args: {
      userId: i.userId,
      installationId: i.installationId,
      reason: i.reason,
      forAll: i.forAll ? '1' : '0',
      firstUse: firstUse ? '1' : '0',
      ...changeArgs(s, i.fingerprint, topology),
    },
  };
}

/** A group call's create (lua/createGroupCall.lua): the caller's fields, its invitees and title. */
export type CreateGroupInput = Omit<CreateInput, 'calleeUserId'> & { inviteeUserIds: string[]; title: string };

export function createGroupCallKeysArgs(
  s: StoreSettings,
  i: CreateGroupInput,
  busy: string[],
  firstUse = false,
  topology: Topology = 'cluster',
  limits: readonly Pick<CreateLimit, 'key' | 'rule'>[] = [],
  screened: Verdicts = {},
): ScriptCall<'createGroupCall'> {
  const c = createRequest(s, i, firstUse, topology, limits);
  const policy = inviteesPolicy(s, c.keys, i.inviteeUserIds, topology, screened);
  return { keys: policy.keys, args: { ...c.args, invitees: JSON.stringify(i.inviteeUserIds), busy: JSON.stringify(busy), title: i.title, ...policy.args } };
}

/** Each invitee's verdict on the caller (or the inviting user) that is not '': read before the script on a cluster. */
export type Verdicts = Record<string, Screened>;

/**
 * Each invitee's call policy (docs/call-policy.md "Group calls"): on a single Redis its two keys
 * per invitee after `before`, for the script to read; on a cluster the verdicts read before it.
 */
function inviteesPolicy(s: StoreSettings, before: string[], inviteeUserIds: readonly string[], topology: Topology, screened: Verdicts) {
  const single = topology === 'single';
  return {
    keys: single ? [...before, ...inviteeUserIds.flatMap((u) => policyKeys(s, u))] : before,
    args: { policyAt: single ? String(before.length + 1) : '', screened: single ? '' : JSON.stringify(screened), screenedReply: s.screenedReply ?? 'unanswered' },
  };
}

export interface InviteInput {
  callId: string;
  userId: string;
  installationId: string;
  inviteeUserIds: string[];
  operationId: string;
  fingerprint: string;
}

/** An invite's keys and arguments: on a single Redis its invitees' limits (as a create's, createLimitsKeysArg) and policies after the request's keys. */
export function inviteKeysArgs(
  s: StoreSettings,
  i: InviteInput,
  busy: string[],
  topology: Topology = 'cluster',
  screened: Verdicts = {},
  limits: readonly Pick<CreateLimit, 'key' | 'rule' | 'invitee'>[] = [],
): ScriptCall<'inviteToCall'> {
  const limited = createLimitsKeysArg(limits, topology);
  const policy = inviteesPolicy(s, [...userRequestKeys(s, i, topology), ...limited.keys], i.inviteeUserIds, topology, screened);
  return {
    keys: policy.keys,
    args: {
      ...policy.args,
      limits: limited.arg,
      userId: i.userId,
      installationId: i.installationId,
      invitees: JSON.stringify(i.inviteeUserIds),
      busy: JSON.stringify(busy),
      ringTimeoutMs: String(s.ringTimeoutMs),
      maxInvitees: String(s.maxGroupInvitees ?? GROUP_CALL_MAX_MEMBERS_DEFAULT),
      ...changeArgs(s, i.fingerprint, topology),
    },
  };
}

export interface RingingInput {
  callId: string;
  userId: string;
  /** How the invitation reached the installation (the invitation-to-receipt metric's path). */
  via: 'socket' | 'apns' | 'fcm';
  operationId: string;
  fingerprint: string;
}

export function ringingKeysArgs(s: StoreSettings, i: RingingInput, topology: Topology = 'cluster'): ScriptCall<'noteRinging'> {
  return {
    keys: userRequestKeys(s, i, topology),
    args: { userId: i.userId, via: i.via, ...changeArgs(s, i.fingerprint, topology) },
  };
}

export function readCallKeysArgs(s: StoreSettings, callId: string, userId: string, topology: Topology = 'cluster'): ScriptCall<'readCall'> {
  return {
    keys: [keys.call(s, callId), keys.outboxForCall(s, callId), keys.ringingForCall(s, callId)],
    args: { userId, retention: retentionArg(s), earlyNotice: earlyNoticeArg(topology) },
  };
}
