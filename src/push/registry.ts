import { createHash } from 'node:crypto';
import type { Redis, Cluster } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import { runScript } from '../redis/scripts.js';
import type { IosEnvironment, PushTokenKind } from './kinds.js';

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

export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

const deviceMember = (installationId: string, kind: string) => `${installationId}\n${kind}`;

export class PushRegistry {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly ks: KeySpace,
  ) {}

  async register(r: Omit<PushRegistration, 'updatedAtMs'>): Promise<PushRegistration> {
    const hash = tokenHash(r.token);
    const updatedAtMs = Number(
      await runScript(
        this.redis,
        'registerPushToken',
        [keys.pushRegistration(this.ks, r.userId, r.installationId, r.kind), keys.devices(this.ks, r.userId)],
        [r.token, hash, r.appId, r.iosEnvironment ?? '', deviceMember(r.installationId, r.kind)],
      ),
    );
    // Rebind: claim the token; if another installation held it, remove it there (only while
    // that registration still holds this very token).
    const owner = `${r.userId}\n${r.installationId}`;
    const previous = await this.redis.set(keys.pushTokenOwner(this.ks, r.kind, hash), owner, 'GET');
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
    const removed = await runScript(
      this.redis,
      'removePushToken',
      [keys.pushRegistration(this.ks, userId, installationId, kind), keys.devices(this.ks, userId)],
      [deviceMember(installationId, kind), cond.tokenHash ?? '', cond.notAfterMs === undefined ? '' : String(cond.notAfterMs)],
    );
    return removed === 1;
  }

  async get(userId: string, installationId: string, kind: PushTokenKind): Promise<PushRegistration | undefined> {
    const h = await this.redis.hgetall(keys.pushRegistration(this.ks, userId, installationId, kind));
    return parseRegistration(userId, installationId, kind, h);
  }

  /**
   * Every registration of a user (the fan-out list for invitations). Plain commands, not a
   * pipeline: lists started in the same tick (the relay looks up a whole batch's users at once)
   * share the client's auto-pipeline, so a batch costs two round trips in all.
   */
  async list(userId: string): Promise<PushRegistration[]> {
    const members = await this.redis.smembers(keys.devices(this.ks, userId));
    const regs = await Promise.all(
      members.map((m) => {
        const [installationId = '', kind = ''] = m.split('\n');
        if (kind !== 'iosVoip' && kind !== 'androidPush') return undefined;
        return this.get(userId, installationId, kind);
      }),
    );
    return regs.filter((r): r is PushRegistration => r !== undefined);
  }
}

function parseRegistration(
  userId: string,
  installationId: string,
  kind: PushTokenKind,
  h: Record<string, string>,
): PushRegistration | undefined {
  if (!h.token || !h.appId) return undefined;
  const reg: PushRegistration = { userId, installationId, kind, token: h.token, appId: h.appId, updatedAtMs: Number(h.updatedAtMs) };
  if (h.iosEnvironment === 'production' || h.iosEnvironment === 'development') reg.iosEnvironment = h.iosEnvironment;
  return reg;
}
