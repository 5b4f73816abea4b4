import { createHash } from 'node:crypto';
import type { Redis, Cluster } from 'ioredis';
import { keys } from '../redis/keys.js';
import { runScript } from '../redis/scripts.js';
import { topologyOf, type Topology } from '../redis/connection.js';
import { parseCallFields, CorruptRecordError, type CallRecord } from './model.js';
import { parseLimited, parseOutcome, type NotAdmitted, type Outcome } from './outcome.js';
import { inCallInstallation } from './participants.js';
import { readStoredCall } from './storedCall.js';
import type { EndReason } from './reasons.js';
import { retentionArg } from './retention.js';
import { memberPresence, type MemberPresence } from './presence.js';
import { readVerdict } from './callPolicy.js';
import {
  answerCallKeysArgs,
  createCallKeysArgs,
  createGroupCallKeysArgs,
  endCallKeysArgs,
  earlyNoticeArg,
  inviteKeysArgs,
  readCallKeysArgs,
  readMessagesKeysArgs,
  renameCallKeysArgs,
  ringingKeysArgs,
  sendMessageKeysArgs,
  type AnswerInput,
  type MoveInput,
  type CreateGroupInput,
  type CreateInput,
  type CreateLimit,
  type EndInput,
  type InviteInput,
  type MessageInput,
  type MessageOutcome,
  type RenameInput,
  type RingingInput,
  type ScriptCall,
  type StoreSettings,
  type Verdicts,
} from './scriptArgs.js';

/**
 * The call store: every change of a call is one Lua script (lua/*.lua). Each script call is a
 * pure `xxxKeysArgs(input) → { keys, args }` (./scriptArgs.ts, re-exported here) plus one
 * execution, and `parseOutcome` maps every reply to a typed outcome.
 */
export * from './scriptArgs.js';
export * from './outcome.js';

/** The request fingerprint: what makes a retry "the same request". */
export function fingerprint(action: string, parts: readonly (string | number | boolean | null)[]): string {
  return createHash('sha256').update(JSON.stringify([action, ...parts])).digest('base64url');
}

/** A request's operationId binding as the store took it before the script, or 'in-script' (requestKeys). */
type Binding = 'new' | 'same' | 'conflict' | 'in-script';

export class CallStore {
  /** A single Redis: the scripts publish early notices and in-call messages themselves (earlyNoticeArg; in-call messages: liveChannelArg). */
  private readonly topology: Topology;

  constructor(
    private readonly redis: Redis | Cluster,
    readonly settings: StoreSettings,
  ) {
    this.topology = topologyOf(redis);
  }

  /**
   * Binds the user's operationId to this request's fingerprint (first use wins). A different
   * fingerprint means the operationId was already used for another request.
   */
  private async bindOperation(userId: string, operationId: string, fp: string): Promise<'new' | 'same' | 'conflict'> {
    const previous = await this.redis.set(
      keys.operationBinding(this.settings, userId, operationId),
      fp,
      'PX',
      this.settings.operationTtlMs,
      'NX',
      'GET',
    );
    return previous === null ? 'new' : previous === fp ? 'same' : 'conflict';
  }

  /**
   * The binding a request takes before its script: on a cluster the store binds first; on a
   * single Redis the script does (requestKeys), and there is nothing to do here.
   */
  private bindFirst(userId: string, operationId: string, fp: string): Promise<Binding> {
    return this.topology === 'single' ? Promise.resolve('in-script') : this.bindOperation(userId, operationId, fp);
  }

  /** Undoes a binding this request made before its script (the script undoes its own). */
  private async unbind(binding: Binding, userId: string, operationId: string): Promise<void> {
    if (binding === 'new') await this.redis.del(keys.operationBinding(this.settings, userId, operationId));
  }

  private async mutate<
    N extends 'createCall' | 'createGroupCall' | 'answerCall' | 'moveCall' | 'endCall' | 'renameCall' | 'inviteToCall' | 'noteRinging',
    R extends Outcome | NotAdmitted = Outcome,
  >(
    userId: string,
    operationId: string,
    fp: string,
    script: N,
    /** The script's keys and arguments, given whether this request's binding was new. */
    callFor: (firstUse: boolean) => ScriptCall<N>,
    bound?: Binding,
    /** The reply's reading: parseLimited for a script that hits rate limits (a create, an invite). */
    parse: (reply: unknown) => R = parseOutcome as (reply: unknown) => R,
  ): Promise<R | Outcome> {
    const binding = bound ?? (await this.bindFirst(userId, operationId, fp));
    if (binding === 'conflict') return { kind: 'failure', code: 'idempotency_conflict' };
    const call = callFor(binding === 'new');
    const outcome = parse(await runScript(this.redis, script, call.keys, call.args));
    // A request refused before it did anything (unknown call, not a party) leaves no trace: its
    // operationId stays unused.
    if (outcome.kind === 'failure' && (outcome.code === 'not_found' || outcome.code === 'forbidden')) await this.unbind(binding, userId, operationId);
    return outcome;
  }

  /**
   * Creates a call. `limits` are the create's rate limits (the caller's, the callee's), hit in
   * order: on a single Redis by the create's script, as its first step
   * (lua/includes/createLimits.lua), so a create costs the busy check and the script; on a cluster
   * apart (hitApart), together with the busy check and the operation binding. When one says no,
   * nothing is created and a binding this request made is undone.
   */
  async create(i: CreateInput, limits: readonly CreateLimit[] = []): Promise<Outcome | NotAdmitted> {
    // On a cluster the callee's policy lives in the callee's slot: its verdict is read in this
    // round trip; on a single Redis the create's script reads it (docs/call-policy.md).
    const verdict = this.topology === 'single' ? Promise.resolve('' as const) : readVerdict(this.redis, this.settings, i.calleeUserId, i.callerUserId);
    const verdicts = verdict.then((v): Verdicts => (v ? { [i.calleeUserId]: v } : {}));
    // hitApart may never wait for it (no limit of the callee's): a failed read is seen through
    // `verdict` below, and must not also be an unhandled rejection, which ends the process.
    verdicts.catch(() => {});
    const [binding, active, refused, screened] = await Promise.all([
      this.bindFirst(i.callerUserId, i.operationId, i.fingerprint),
      // The callee's busy marker, kept by the relay in the event log's meta hash (src/calls/activeCalls.ts).
      this.settings.callWaiting ? null : this.redis.hget(keys.eventLogMeta(this.settings, i.calleeUserId), 'active'),
      this.hitApart(limits, verdicts),
      verdict,
    ]);
    if (refused) {
      await this.unbind(binding, i.callerUserId, i.operationId);
      return refused;
    }
    const busy = await this.stillIn(active, i.calleeUserId);
    const callFor = (firstUse: boolean) => createCallKeysArgs(this.settings, i, busy, firstUse, this.topology, limits, screened);
    return this.mutate(i.callerUserId, i.operationId, i.fingerprint, 'createCall', callFor, binding, parseLimited(limits));
  }

  /**
   * On a cluster, a create's or an invite's limits hit before its script (their counters live in
   * other slots than the call's keys), sent at once so they share a round trip with the store's
   * first reads: the first refusal in their order, or undefined. On a single Redis, nothing: the
   * script hits them.
   */
  private async hitApart(limits: readonly CreateLimit[], screened: Promise<Verdicts>): Promise<NotAdmitted | undefined> {
    if (this.topology === 'single' || limits.length === 0) return undefined;
    // An invitee's counter waits for its verdict: a call its policy screens does not count.
    const allowed = { allowed: true, retryAfterMs: 0 };
    const decisions = await Promise.all(limits.map(async (l) => (l.invitee !== undefined && (await screened)[l.invitee] ? allowed : l.hit())));
    const n = decisions.findIndex((d) => !d.allowed);
    return n < 0 ? undefined : { kind: 'not_admitted', refused: limits[n]!, retryAfterMs: decisions[n]!.retryAfterMs };
  }

  /**
   * The users of `userIds` in an accepted call (their busy markers, src/calls/activeCalls.ts), when
   * call waiting is off; each marker counts only while the call it names is still accepted.
   */
  private async busyOf(userIds: readonly string[]): Promise<string[]> {
    if (this.settings.callWaiting || userIds.length === 0) return [];
    const active = await Promise.all(userIds.map((u) => this.redis.hget(keys.eventLogMeta(this.settings, u), 'active')));
    const busy = await Promise.all(active.map((c, n) => this.stillIn(c, userIds[n]!)));
    return userIds.filter((_, n) => busy[n]);
  }

  /**
   * Whether `userId`'s busy marker (`callId`, or null) still holds. The relay keeps the marker a
   * moment behind the calls (up to its gathering pause, RELAY_GATHER_MS, and more under load), so
   * it counts only while the user is still in the call it names: that call accepted and, in a
   * group call, the user a joined member. A user who just hung up is not busy, nor one who just
   * left a group call that goes on (and may be invited back into it at once).
   */
  private async stillIn(callId: string | null, userId: string): Promise<boolean> {
    if (!callId) return false;
    const call = await readStoredCall(this.redis, keys.call(this.settings, callId));
    return !!call && inCallInstallation(call, userId) !== undefined;
  }

  /** Creates a group call (lua/createGroupCall.lua); `limits` as for `create` (the caller's, each invitee's). */
  async createGroup(i: CreateGroupInput, limits: readonly CreateLimit[] = []): Promise<Outcome | NotAdmitted> {
    const a = await this.admitInvitees(i.callerUserId, i.operationId, i.fingerprint, i.inviteeUserIds, limits);
    if (a.kind === 'not_admitted') return a;
    const callFor = (firstUse: boolean) => createGroupCallKeysArgs(this.settings, i, a.busy, firstUse, this.topology, limits, a.screened);
    return this.mutate(i.callerUserId, i.operationId, i.fingerprint, 'createGroupCall', callFor, a.binding, parseLimited(limits));
  }

  /**
   * What a request that rings invitees (a group create, an invite) needs before its script, in one
   * round trip: its binding (on a cluster), which invitees are busy, their verdicts on `userId` (on
   * a cluster), and the limits hit apart (on a cluster, hitApart); a refusal undoes the binding.
   */
  private async admitInvitees(
    userId: string,
    operationId: string,
    fp: string,
    inviteeUserIds: readonly string[],
    limits: readonly CreateLimit[],
  ): Promise<NotAdmitted | { kind: 'admitted'; binding: Binding; busy: string[]; screened: Verdicts }> {
    const verdicts = this.verdictsOf(inviteeUserIds, userId);
    const [binding, busy, refused, screened] = await Promise.all([this.bindFirst(userId, operationId, fp), this.busyOf(inviteeUserIds), this.hitApart(limits, verdicts), verdicts]);
    if (!refused) return { kind: 'admitted', binding, busy, screened };
    await this.unbind(binding, userId, operationId);
    return refused;
  }

  /**
   * On a cluster, each invitee's verdict on `callerUserId` (lua/readCallPolicy.lua), read in the
   * round trip of the busy check; on a single Redis the script reads them (docs/call-policy.md).
   */
  private async verdictsOf(userIds: readonly string[], callerUserId: string): Promise<Verdicts> {
    if (this.topology === 'single') return {};
    const v = await Promise.all(userIds.map((u) => readVerdict(this.redis, this.settings, u, callerUserId)));
    return Object.fromEntries(userIds.flatMap((u, n) => (v[n] ? [[u, v[n]]] : [])));
  }

  /**
   * Rings more members into a group call (lua/inviteToCall.lua). `limits` are each invitee's
   * invitation limit, hit as a create's are (single Redis: by the script, first; cluster:
   * hitApart), and not toward an invitee whose policy screens the inviting user.
   */
  async invite(i: InviteInput, limits: readonly CreateLimit[] = []): Promise<Outcome | NotAdmitted> {
    const a = await this.admitInvitees(i.userId, i.operationId, i.fingerprint, i.inviteeUserIds, limits);
    if (a.kind === 'not_admitted') return a;
    const callFor = () => inviteKeysArgs(this.settings, i, a.busy, this.topology, a.screened, limits);
    return this.mutate(i.userId, i.operationId, i.fingerprint, 'inviteToCall', callFor, a.binding, parseLimited(limits));
  }

  /** A ringing receipt (lua/noteRinging.lua). */
  ringing(i: RingingInput): Promise<Outcome> {
    return this.mutate(i.userId, i.operationId, i.fingerprint, 'noteRinging', () => ringingKeysArgs(this.settings, i, this.topology));
  }

  rename(i: RenameInput): Promise<Outcome> {
    return this.mutate(i.userId, i.operationId, i.fingerprint, 'renameCall', () => renameCallKeysArgs(this.settings, i, this.topology));
  }

  answer(i: AnswerInput): Promise<Outcome> {
    return this.mutate(i.userId, i.operationId, i.fingerprint, 'answerCall', (firstUse) => answerCallKeysArgs(this.settings, i, firstUse, this.topology));
  }

  /** Moves an accepted call to another installation of a member in it (lua/moveCall.lua). */
  move(i: MoveInput): Promise<Outcome> {
    return this.mutate(i.userId, i.operationId, i.fingerprint, 'moveCall', (firstUse) => answerCallKeysArgs(this.settings, i, firstUse, this.topology));
  }

  end(i: EndInput): Promise<Outcome> {
    return this.mutate(i.userId, i.operationId, i.fingerprint, 'endCall', (firstUse) => endCallKeysArgs(this.settings, i, firstUse, this.topology));
  }

  /**
   * Sends an in-call message (lua/sendMessage.lua): rate-limited per call and sender, and
   * idempotent by operationId like the other call operations. A refused message leaves no trace:
   * its operationId stays unused. On a single Redis the script binds the operationId itself (one
   * round trip); on a cluster the binding comes first, so there a reused operationId is refused
   * before the limit counts it.
   */
  async message(i: MessageInput): Promise<MessageOutcome> {
    const binding = await this.bindFirst(i.userId, i.operationId, i.fingerprint);
    if (binding === 'conflict') return { kind: 'failure', code: 'idempotency_conflict' };
    const c = sendMessageKeysArgs(this.settings, i, this.topology);
    const reply = (await runScript(this.redis, 'sendMessage', c.keys, c.args)) as unknown[];
    const [kind, code, , fields] = reply;
    if ((kind === 'fresh' || kind === 'replay') && code === 'ok' && Array.isArray(fields)) {
      const [eventId, seq, at] = fields as string[];
      return { kind: 'sent', eventId: String(eventId), seq: Number(seq), occurredAtMs: Number(at), replayed: kind === 'replay' };
    }
    if (kind === 'limited') {
      await this.unbind(binding, i.userId, i.operationId);
      return { kind: 'limited', retryAfterMs: Number(code) };
    }
    if (kind === 'error' && (code === 'not_found' || code === 'forbidden' || code === 'idempotency_conflict' || code === 'call_not_active' || code === 'not_pair')) {
      if (code !== 'idempotency_conflict') await this.unbind(binding, i.userId, i.operationId);
      return { kind: 'failure', code };
    }
    throw new CorruptRecordError(`unexpected sendMessage reply ${String(kind)}/${String(code)}`);
  }

  /**
   * The call's messages for one installation with a per-sender seq above `afterSeq`, as event
   * JSON texts in send order (lua/readMessages.lua); undefined for a non-party or unknown call.
   */
  async messagesFor(callId: string, userId: string, installationId: string, afterSeq: number): Promise<string[] | undefined> {
    const c = readMessagesKeysArgs(this.settings, callId, userId, installationId, afterSeq);
    const reply = (await runScript(this.redis, 'readMessages', c.keys, c.args)) as unknown[];
    if (reply[0] !== 'ok') return undefined;
    return (reply[1] as string[] | undefined) ?? [];
  }

  /**
   * The live signal state of each member in the call now (lua/readPresence.lua), by userId: the
   * snapshot's `presence` (docs/signaling.md "Live signals"). Empty for an ended or unknown call.
   */
  async presence(callId: string): Promise<Record<string, MemberPresence>> {
    const flat = (await runScript(this.redis, 'readPresence', [keys.call(this.settings, callId), keys.callPresence(this.settings, callId)], {})) as string[];
    const out: Record<string, MemberPresence> = {};
    for (let i = 0; i < flat.length; i += 2) out[flat[i]!] = memberPresence(JSON.parse(flat[i + 1]!) as Record<string, unknown>);
    return out;
  }

  async read(callId: string, userId: string): Promise<Outcome> {
    const c = readCallKeysArgs(this.settings, callId, userId, this.topology);
    return parseOutcome(await runScript(this.redis, 'readCall', c.keys, c.args));
  }

  /**
   * Ends any call for the app's backend (lua/endCallByServer.lua): by the system, with `reason`
   * for both sides. `ended` false: it had already ended. Undefined: no such call.
   */
  async endByServer(callId: string, reason: EndReason): Promise<{ ended: boolean; call: CallRecord } | undefined> {
    const s = this.settings;
    const reply = (await runScript(
      this.redis,
      'endCallByServer',
      [keys.call(s, callId), keys.outboxForCall(s, callId), keys.ringingForCall(s, callId)],
      { reason, retention: retentionArg(s), earlyNotice: earlyNoticeArg(this.topology) },
    )) as unknown[];
    if (reply[0] === 'error') return undefined;
    return { ended: reply[0] === 'ended', call: parseCallFields(reply[1]) };
  }

  /**
   * Removes a member from a group call for the app's backend (lua/removeMember.lua). `removed`
   * false: it was already out, or the call has ended. A failure code: no such call, a one-to-one
   * call, or not a member.
   */
  async removeMember(callId: string, userId: string): Promise<{ removed: boolean; call: CallRecord } | { failure: 'not_found' | 'not_group' | 'not_member' }> {
    const s = this.settings;
    const reply = (await runScript(this.redis, 'removeMember', [keys.call(s, callId), keys.outboxForCall(s, callId), keys.ringingForCall(s, callId)], { userId, retention: retentionArg(s), earlyNotice: earlyNoticeArg(this.topology) })) as unknown[];
    if (reply[0] === 'error') return { failure: reply[1] as 'not_found' | 'not_group' | 'not_member' };
    return { removed: reply[0] === 'removed', call: parseCallFields(reply[1]) };
  }

  /**
   * The call as stored, without membership check or lazy expiry (one plain read): for the push
   * sender, which checks ringing and time left itself. Undefined when the call is gone.
   */
  async peek(callId: string): Promise<CallRecord | undefined> {
    return readStoredCall(this.redis, keys.call(this.settings, callId));
  }
}

