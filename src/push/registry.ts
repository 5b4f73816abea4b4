import { createHash } from 'node:crypto';
import type { Redis, Cluster } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import { runScript } from '../redis/scripts.js';
import { PUSH_TOKEN_KINDS, type IosEnvironment, type PushTokenKind } from './kinds.js';

/**
 * Push registrations: one per (installation, kind), stored under the user so invitations fan out
 * to every device of the callee. A token belongs to one installation at a time: registering it
 * from another installation (another user signed in on the phone) moves it there.
 */

export interface PushRegistration {
  userId: string;
  installationId: string;
  kind: PushTokenKind;
  token: string;
  appId: string;
  iosEnvironment?: IosEnvironment;
  updatedAtMs: number;
}

/** What clients and logs may see of a token: its last 6 characters. */
export function tokenSuffix(token: string): string {
  return token.slice(-6);
}

/**
 * A removal of one registration on an invalid-token report: only while it still holds the token
 * (by hash) and was not written after `notAfterMs` (the send).
 */
export interface TokenRemoval {
  userId: string;
  installationId: string;
  kind: PushTokenKind;
  tokenHash: string;
  notAfterMs: number;
}

export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

/** The field of one installation's registration in its user's registrations hash. */
export const registrationField = (installationId: string, kind: string) => `${installationId}\n${kind}`;

export class PushRegistry {
  /**
   * `idleMs`: PUSH_REGISTRATION_IDLE_DAYS in ms. A user's registrations and their tokens' owner
   * keys expire together this long after the user's last registration write (docs/keyspace.md
   * "Push registrations"): apps register at every launch, so only unused installations lapse.
   */
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly ks: KeySpace,
    readonly idleMs: number,
  ) {}

  async register(r: Omit<PushRegistration, 'updatedAtMs'>): Promise<PushRegistration> {
    const hash = tokenHash(r.token);
    const field = registrationField(r.installationId, r.kind);
    const [stamp, replacedHash, expireAt, ...held] = (await runScript(
      this.redis,
      'registerPushToken',
      [keys.pushRegistrations(this.ks, r.userId)],
      { token: r.token, tokenHash: hash, appId: r.appId, iosEnvironment: r.iosEnvironment ?? '', field, idleMs: String(this.idleMs) },
    )) as string[];
    const updatedAtMs = Number(stamp);
    // Rebind: claim the token; if another installation held it, remove it there (only while
    // that registration still holds this very token).
    const owner = `${r.userId}\n${r.installationId}`;
    if (replacedHash) await this.releaseOwner(r.kind, replacedHash, owner);
    const previous = await this.redis.set(keys.pushTokenOwner(this.ks, r.kind, hash), owner, 'PXAT', expireAt!, 'GET');
    await this.keepOwners(r.userId, expireAt!, held, field);
    if (previous !== null && previous !== owner) {
      const [prevUser, prevInstallation] = previous.split('\n');
      if (prevUser !== undefined && prevInstallation !== undefined) {
        await this.remove(prevUser, prevInstallation, r.kind, { tokenHash: hash });
      }
    }
    return { ...r, updatedAtMs };
  }

  /**
   * Removes a registration. With `tokenHash`, only while it still holds that token; with
   * `notAfterMs`, only if it was not re-registered after that time.
   */
  async remove(
    userId: string,
    installationId: string,
    kind: PushTokenKind,
    cond: { tokenHash?: string; notAfterMs?: number } = {},
  ): Promise<boolean> {
    const removed = (await runScript(
      this.redis,
      'removePushToken',
      [keys.pushRegistrations(this.ks, userId)],
      { field: registrationField(installationId, kind), tokenHash: cond.tokenHash ?? '', notAfterMs: cond.notAfterMs === undefined ? '' : String(cond.notAfterMs) },
    )) as number | string;
    if (removed === 0) return false;
    if (removed) await this.releaseOwner(kind, removed as string, `${userId}\n${installationId}`);
    return true;
  }

  /**
   * Moves the owner keys of the user's registrations (`held`: field, tokenHash, … as
   * lua/includes/pushIdleExpiry.lua returns them) to the registrations' expiry, except `skip`'s
   * (already set). One command per key: they live in many slots. After every script that
   * writes the registrations hash (registration, src/push/legacyRegistrations.ts).
   */
  async keepOwners(userId: string, expireAt: string, held: readonly string[], skip?: string): Promise<void> {
    const moves: Promise<unknown>[] = [];
    for (let i = 0; i + 1 < held.length; i += 2) {
      if (held[i] === skip) continue;
      const [installationId = '', kind = ''] = held[i]!.split('\n');
      const ownerKey = keys.pushTokenOwner(this.ks, kind, held[i + 1]!);
      moves.push(runScript(this.redis, 'keepTokenOwner', [ownerKey], { owner: `${userId}\n${installationId}`, expireAtMs: expireAt }));
    }
    await Promise.all(moves);
  }

  /**
   * A token's owner key lives as long as a registration holds the token (docs/keyspace.md): the
   * registration that held it is gone, so its key goes too, unless another installation owns it now.
   */
  private releaseOwner(kind: PushTokenKind, hash: string, owner: string): Promise<unknown> {
    return runScript(this.redis, 'releaseTokenOwner', [keys.pushTokenOwner(this.ks, kind, hash)], { owner, onlyUnexpiring: '' });
  }

  /**
   * Gives what a version before idle expiry wrote its end (src/push/legacyRegistrations.ts): a
   * user's registrations hash without a TTL gets the one a registration write gives it, with the
   * owner keys of its tokens.
   */
  async expireUntouched(userId: string): Promise<boolean> {
    const [expireAt, ...held] = (await runScript(this.redis, 'touchPushRegistrations', [keys.pushRegistrations(this.ks, userId)], { idleMs: String(this.idleMs) })) as string[];
    if (expireAt === undefined) return false;
    await this.keepOwners(userId, expireAt, held);
    return true;
  }

  /**
   * An owner key without a TTL (written before idle expiry): moved to its registration's expiry
   * while a registration holds the token, else deleted (it has no more use: docs/keyspace.md).
   */
  async settleUntouchedOwner(kind: string, hash: string): Promise<'kept' | 'deleted' | 'left'> {
    const ownerKey = keys.pushTokenOwner(this.ks, kind, hash);
    const owner = await this.redis.get(ownerKey);
    const [userId, installationId] = owner?.split('\n') ?? [];
    if (owner === null || userId === undefined || installationId === undefined || !isTokenKind(kind)) return 'left';
    const reg = await this.get(userId, installationId, kind);
    if (reg && tokenHash(reg.token) === hash) {
      const expireAt = Number(await this.redis.call('PEXPIRETIME', keys.pushRegistrations(this.ks, userId)));
      if (expireAt <= 0) return 'left';
      await runScript(this.redis, 'keepTokenOwner', [ownerKey], { owner, expireAtMs: String(expireAt) });
      return 'kept';
    }
    return (await runScript(this.redis, 'releaseTokenOwner', [ownerKey], { owner, onlyUnexpiring: '1' })) === 1 ? 'deleted' : 'left';
  }

  /**
   * Makes sure an invalid-token removal happened (a repeat of it is harmless). False when it must
   * not: the installation registered that token again after the report.
   */
  async ensureRemoved(t: TokenRemoval): Promise<boolean> {
    await this.remove(t.userId, t.installationId, t.kind, t);
    const now = await this.get(t.userId, t.installationId, t.kind);
    return now === undefined || tokenHash(now.token) !== t.tokenHash;
  }

  async get(userId: string, installationId: string, kind: PushTokenKind): Promise<PushRegistration | undefined> {
    const stored = await this.redis.hget(keys.pushRegistrations(this.ks, userId), registrationField(installationId, kind));
    return stored === null ? undefined : parseRegistration(userId, installationId, kind, stored);
  }

  /**
   * Every registration of a user (the fan-out list for invitations). The relay reads the same
   * hash in the script that appends the user's events (lua/appendEvents.lua) instead.
   */
  async list(userId: string): Promise<PushRegistration[]> {
    return parseRegistrations(userId, await this.redis.hgetall(keys.pushRegistrations(this.ks, userId)));
  }
}

/** A user's registrations from their hash, as HGETALL returns it (an object or a flat list). */
export function parseRegistrations(userId: string, stored: Record<string, string> | readonly string[]): PushRegistration[] {
  const entries: [string, string][] = [];
  if (Array.isArray(stored)) for (let i = 0; i + 1 < stored.length; i += 2) entries.push([stored[i]!, stored[i + 1]!]);
  else entries.push(...Object.entries(stored as Record<string, string>));
  const out: PushRegistration[] = [];
  for (const [field, value] of entries) {
    const [installationId = '', kind = ''] = field.split('\n');
    if (!isTokenKind(kind)) continue;
    const reg = parseRegistration(userId, installationId, kind, value);
    if (reg) out.push(reg);
  }
  return out;
}

function parseRegistration(userId: string, installationId: string, kind: PushTokenKind, stored: string): PushRegistration | undefined {
  let h: Record<string, unknown>;
  try {
    h = JSON.parse(stored) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (typeof h.token !== 'string' || !h.token || typeof h.appId !== 'string' || !h.appId) return undefined;
  const reg: PushRegistration = { userId, installationId, kind, token: h.token, appId: h.appId, updatedAtMs: Number(h.updatedAtMs) };
  if (h.iosEnvironment === 'production' || h.iosEnvironment === 'development') reg.iosEnvironment = h.iosEnvironment;
  return reg;
}

const isTokenKind = (kind: string): kind is PushTokenKind => (PUSH_TOKEN_KINDS as readonly string[]).includes(kind);
