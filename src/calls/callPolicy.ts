import type { Redis, Cluster } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import { runScript } from '../redis/scripts.js';
import { CorruptRecordError } from './model.js';

/**
 * Who may call a user (docs/call-policy.md): the user's mode, block list and allow list, kept in
 * the user's slot (src/redis/keys.ts callPolicy, allowList) and read by the create's script
 * (lua/includes/callPolicy.lua). This module writes and reads them for the routes.
 */

export const CALL_POLICY_MODES = ['everyone', 'contacts', 'nobody'] as const;
export type CallPolicyMode = (typeof CALL_POLICY_MODES)[number];

import { SCREENED_REASONS, type Screened } from './reasons.js';
export { SCREENED_REASONS, type Screened } from './reasons.js';

/** What do not disturb does with a call it stops (docs/call-policy.md "Do not disturb"). */
export const DND_ACTIONS = ['silence', 'reject'] as const;
export type DndAction = (typeof DND_ACTIONS)[number];

/** docs/call-policy.md "Limits". */
export const MAX_BLOCKED = 1_000;
export const MAX_FAVOURITES = 100;
export const MAX_ALLOWED = 50_000;
/** UserIds one request may add, remove or send in one allow-list page. */
export const MAX_IDS_PER_REQUEST = 1_000;
/** How long an unfinished allow-list replace waits for its next page. */
export const ALLOW_REPLACE_STAGING_TTL_MS = 3_600_000;

export interface DoNotDisturb {
  /** On now: turned on, and its `untilMs` (if any) not yet passed. */
  on: boolean;
  /** When it ends by itself; null: when turned off. */
  untilMs: number | null;
  action: DndAction;
  /** Users whose calls ring through it, oldest first. */
  favouriteUserIds: string[];
}

export interface CallPolicyView {
  userId: string;
  mode: CallPolicyMode;
  blockedUserIds: string[];
  allowListSize: number;
  doNotDisturb: DoNotDisturb;
}

export interface PolicyEdit {
  mode?: CallPolicyMode | undefined;
  block: readonly string[];
  unblock: readonly string[];
  /** Turns it on (until `untilMs`, or until turned off) or off; its action when given. */
  doNotDisturb?: { on: boolean; untilMs?: number | undefined; action?: DndAction | undefined } | undefined;
  favourite: readonly string[];
  unfavourite: readonly string[];
}

export type PolicyEditOutcome = { kind: 'ok'; policy: CallPolicyView } | { kind: 'too_many_blocked' } | { kind: 'too_many_favourites' };
export type AllowPageOutcome =
  | { kind: 'ok'; state: 'gathering' | 'committed'; size: number }
  | { kind: 'failure'; code: 'page_out_of_order' | 'replace_expired' | 'too_many_allowed' };

export class CallPolicyStore {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly ks: KeySpace,
  ) {}

  async read(userId: string): Promise<CallPolicyView> {
    const [hash, size] = await Promise.all([this.redis.hgetall(keys.callPolicy(this.ks, userId)), this.redis.scard(keys.allowList(this.ks, userId))]);
    const mode = (CALL_POLICY_MODES as readonly string[]).includes(hash.mode ?? '') ? (hash.mode as CallPolicyMode) : 'everyone';
    // Each list's users by the time they were added (the field's value), oldest first.
    const listed = (prefix: string) =>
      Object.entries(hash)
        .filter(([f]) => f.startsWith(prefix))
        .sort((a, b) => Number(a[1]) - Number(b[1]))
        .map(([f]) => f.slice(prefix.length));
    const until = hash.dndUntil === undefined ? undefined : Number(hash.dndUntil);
    const doNotDisturb: DoNotDisturb = {
      on: until !== undefined && (until === 0 || Date.now() < until),
      untilMs: until ? until : null,
      action: hash.dndAction === 'reject' ? 'reject' : 'silence',
      favouriteUserIds: listed('f:'),
    };
    return { userId, mode, blockedUserIds: listed('b:'), allowListSize: size, doNotDisturb };
  }

  /** Sets the mode and do not disturb (unless undefined) and edits the block and favourite lists at once (lua/editCallPolicy.lua). */
  async edit(userId: string, e: PolicyEdit): Promise<PolicyEditOutcome> {
    const dnd = e.doNotDisturb;
    const reply = (await runScript(this.redis, 'editCallPolicy', [keys.callPolicy(this.ks, userId)], {
      mode: e.mode ?? '',
      block: JSON.stringify(e.block),
      unblock: JSON.stringify(e.unblock),
      maxBlocked: String(MAX_BLOCKED),
      dndUntil: dnd === undefined ? '' : dnd.on ? String(dnd.untilMs ?? 0) : 'off',
      dndAction: dnd?.action ?? '',
      favourite: JSON.stringify(e.favourite),
      unfavourite: JSON.stringify(e.unfavourite),
      maxFavourites: String(MAX_FAVOURITES),
    })) as unknown[];
    if (reply[0] === 'error' && reply[1] === 'too_many_blocked') return { kind: 'too_many_blocked' };
    if (reply[0] === 'error' && reply[1] === 'too_many_favourites') return { kind: 'too_many_favourites' };
    if (reply[0] !== 'ok') throw new CorruptRecordError(`unexpected editCallPolicy reply ${String(reply[0])}`);
    return { kind: 'ok', policy: await this.read(userId) };
  }

  /**
   * A page of the allow list in use, by SSCAN: `cursor` '0' starts, a null `nextCursor` ends.
   * `count` is a hint; a user may come twice, and a replace committed meanwhile ends the walk on
   * the new list (docs/call-policy.md "The allow list").
   */
  async listAllowed(userId: string, cursor: string, count: number): Promise<{ userIds: string[]; nextCursor: string | null }> {
    const [next, userIds] = await this.redis.sscan(keys.allowList(this.ks, userId), cursor, 'COUNT', count);
    return { userIds, nextCursor: next === '0' ? null : next };
  }

  /** One page of an allow-list replace (lua/replaceAllowList.lua). */
  async replaceAllowPage(userId: string, p: { replaceId: string; page: number; userIds: readonly string[]; last: boolean }): Promise<AllowPageOutcome> {
    const ks = this.ks;
    const reply = (await runScript(this.redis, 'replaceAllowList', [keys.callPolicy(ks, userId), keys.allowList(ks, userId), keys.allowListNext(ks, userId)], {
      replaceId: p.replaceId,
      page: String(p.page),
      userIds: JSON.stringify(p.userIds),
      last: p.last ? '1' : '0',
      maxAllowed: String(MAX_ALLOWED),
      stagingTtlMs: String(ALLOW_REPLACE_STAGING_TTL_MS),
    })) as unknown[];
    if (reply[0] === 'ok' && (reply[1] === 'gathering' || reply[1] === 'committed')) return { kind: 'ok', state: reply[1], size: Number(reply[2]) };
    if (reply[0] === 'error' && (reply[1] === 'page_out_of_order' || reply[1] === 'replace_expired' || reply[1] === 'too_many_allowed')) return { kind: 'failure', code: reply[1] };
    throw new CorruptRecordError(`unexpected replaceAllowList reply ${String(reply[0])}`);
  }
}

/** The keys the create's script reads a callee's policy from (lua/includes/callPolicy.lua): the hash, then the allow list. */
export function policyKeys(ks: KeySpace, userId: string): [string, string] {
  return [keys.callPolicy(ks, userId), keys.allowList(ks, userId)];
}

/**
 * On a cluster, the callee's verdict on the caller (lua/readCallPolicy.lua), read before the
 * create's script in the same round trip as its operation binding: '' when the call may ring.
 */
export async function readVerdict(redis: Redis | Cluster, ks: KeySpace, calleeUserId: string, callerUserId: string): Promise<Screened | ''> {
  const v = await runScript(redis, 'readCallPolicy', policyKeys(ks, calleeUserId), { callerUserId });
  if (v === '' || (SCREENED_REASONS as readonly unknown[]).includes(v)) return v as Screened | '';
  throw new CorruptRecordError(`unexpected readCallPolicy reply ${String(v)}`);
}
