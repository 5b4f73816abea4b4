import { createHash, createHmac } from 'node:crypto';
import { JanusApi, JanusRefusal } from './janusApi.js';
import { janusToken } from './janusToken.js';
import { placeRoom } from './placement.js';
import type { Sfu, SfuAccess, SfuObserver, SfuParticipant } from './sfu.js';

/** VideoRoom error codes (Janus's janus_videoroom.c). */
const NO_SUCH_ROOM = 426;
const ROOM_EXISTS = 427;
const NO_SUCH_FEED = 428;

export interface JanusInstance {
  /** The backend's HTTP API URL (JANUS_URLS). */
  url: string;
  /** What clients connect to (JANUS_CLIENT_URLS). */
  clientUrl: string;
}

export interface JanusOptions {
  instances: readonly JanusInstance[];
  apiSecret: string;
  tokenSecret: string;
  adminKey: string;
  /** Publishers a room admits at once. */
  maxPublishers: number;
  timeoutMs: number;
}

/** The VideoRoom room number of a call: the first 48 bits of SHA-256 of its callId (a safe integer). */
export function janusRoomId(callId: string): number {
  return createHash('sha256').update(`room\n${callId}`).digest().readUIntBE(0, 6);
}

/**
 * Janus's VideoRoom as a call's SFU (docs/operations.md "SFU media"). Each call has one private,
 * non-permanent room on the instance `placeRoom` picks, numbered by `janusRoomId`, with a secret
 * derived from the VideoRoom `admin_key` (only the backend and Janus know it; the backend needs
 * nothing stored to find it again). The room checks VideoRoom `allowed` tokens from its creation:
 * a participant's credential is a Janus signed token that is at once its session token (Janus
 * checks its signature and expiry on every request) and, added to the room's `allowed` list, its
 * only way into that room. Janus ties no session to the token that made it: a device that renews
 * its media session before `expiresAtMs` sends the new token on its session's requests (keepalives
 * included) and its session lives as long as it is in the call; one that left gets no new token.
 * A participant joins as the publisher id `participantId` gives it, so
 * the backend can kick it; the room requires subscribers to name their publisher's `private_id`,
 * so a kick ends the participant's subscriptions too.
 */
export class JanusSfu implements Sfu {
  readonly kind = 'janus';
  private readonly apis: Map<string, JanusApi>;

  constructor(
    private readonly opts: JanusOptions,
    private readonly observe: SfuObserver,
  ) {
    this.apis = new Map(opts.instances.map((i) => [i.url, new JanusApi(i.url, opts.apiSecret, opts.timeoutMs)]));
  }

  async openRoom(callId: string): Promise<'created' | 'existed'> {
    const { api } = this.placed(callId);
    try {
      await this.request(api, 'create', {
        request: 'create',
        room: janusRoomId(callId),
        admin_key: this.opts.adminKey,
        secret: this.secret('secret', callId),
        is_private: true,
        permanent: false,
        publishers: this.opts.maxPublishers,
        // Janus checks tokens only when the list is not empty: it starts with one no client holds.
        allowed: [this.secret('allowed', callId)],
        // Subscriptions belong to a publisher of the room, and go with it when it is kicked.
        require_pvtid: true,
      });
      this.observe.room('created');
      return 'created';
    } catch (err) {
      if (err instanceof JanusRefusal && err.code === ROOM_EXISTS) return 'existed';
      throw err;
    }
  }

  async closeRoom(callId: string): Promise<'destroyed' | 'absent'> {
    const { api } = this.placed(callId);
    try {
      await this.request(api, 'destroy', { request: 'destroy', room: janusRoomId(callId), secret: this.secret('secret', callId), permanent: false });
      this.observe.room('destroyed');
      return 'destroyed';
    } catch (err) {
      if (err instanceof JanusRefusal && err.code === NO_SUCH_ROOM) return 'absent';
      throw err;
    }
  }

  async admit(p: SfuParticipant, expiresAtMs: number): Promise<SfuAccess> {
    const { api, instance } = this.placed(p.callId);
    const token = janusToken(this.opts.tokenSecret, Math.floor(expiresAtMs / 1000), this.tag(p));
    const room = janusRoomId(p.callId);
    const secret = this.secret('secret', p.callId);
    const allow = () => this.request(api, 'allow', { request: 'allowed', room, secret, action: 'add', allowed: [token] });
    let listed: Record<string, unknown>;
    try {
      listed = await allow();
    } catch (err) {
      // Made on accept by the relay (src/media/roomKeeper.ts); a join may come first, or after a
      // Janus restart lost it.
      if (!(err instanceof JanusRefusal && err.code === NO_SUCH_ROOM)) throw err;
      await this.openRoom(p.callId);
      listed = await allow();
    }
    // A participant renews its credential for as long as it stays in the call (docs/operations.md
    // "SFU media"): its expired tokens leave the list, so the list holds about one per participant.
    const expired = tokensOf(listed, this.tag(p)).filter((t) => tokenExpiry(t) * 1000 <= Date.now());
    if (expired.length > 0) await this.request(api, 'revoke', { request: 'allowed', room, secret, action: 'remove', allowed: expired });
    this.observe.join();
    return { kind: 'janus', url: instance.clientUrl, room: janusRoomId(p.callId), token, participantId: this.participantId(p) };
  }

  async evict(callId: string, gone: readonly SfuParticipant[]): Promise<void> {
    if (gone.length === 0) return;
    const { api } = this.placed(callId);
    const room = janusRoomId(callId);
    const secret = this.secret('secret', callId);
    try {
      // First their tokens leave the `allowed` list, so none of them can join again; the reply to
      // any `allowed` request lists the room's tokens, and adding the placeholder again reads it.
      const listed = await this.request(api, 'allow', { request: 'allowed', room, secret, action: 'add', allowed: [this.secret('allowed', callId)] });
      const revoked = gone.flatMap((p) => tokensOf(listed, this.tag(p)));
      if (revoked.length > 0) await this.request(api, 'revoke', { request: 'allowed', room, secret, action: 'remove', allowed: revoked });
      for (const p of gone) {
        try {
          await this.request(api, 'kick', { request: 'kick', room, secret, id: this.participantId(p) });
          this.observe.kick();
        } catch (err) {
          // Not in the room (never connected, already kicked): nothing to do.
          if (!(err instanceof JanusRefusal && err.code === NO_SUCH_FEED)) throw err;
        }
      }
    } catch (err) {
      if (!(err instanceof JanusRefusal && err.code === NO_SUCH_ROOM)) throw err;
    }
  }

  async ready(): Promise<boolean> {
    const answers = await Promise.all([...this.apis.values()].map((api) => api.info().then(() => true, () => false)));
    return answers.every(Boolean);
  }

  private placed(callId: string): { instance: JanusInstance; api: JanusApi } {
    const instance = placeRoom(callId, this.opts.instances);
    return { instance, api: this.apis.get(instance.url)! };
  }

  /** Room secrets and tokens derived from the admin key: the same in every process, never stored. */
  private secret(purpose: string, of: string): string {
    return this.mac(purpose, of).toString('base64url');
  }

  private mac(purpose: string, of: string): Buffer {
    return createHmac('sha256', this.opts.adminKey).update(`${purpose}\n${of}`).digest();
  }

  /** What makes a participant's tokens its own: the same for every token of its installation in the call. */
  private tag(p: SfuParticipant): string {
    return this.secret('participant', `${p.callId}\n${p.userId}\n${p.installationId}`).slice(0, 22);
  }

  /** The participant's VideoRoom publisher id: 48 bits (a safe integer, not 0) derived from call, user and installation. */
  private participantId(p: SfuParticipant): number {
    return this.mac('feed', `${p.callId}\n${p.userId}\n${p.installationId}`).readUIntBE(0, 6) || 1;
  }

  private async request(api: JanusApi, op: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
    try {
      return await api.videoroom(body);
    } catch (err) {
      if (!(err instanceof JanusRefusal && [ROOM_EXISTS, NO_SUCH_ROOM, NO_SUCH_FEED].includes(err.code))) this.observe.error(op);
      throw err;
    }
  }
}

/** The tokens of the room's `allowed` list (as the reply to an `allowed` request gives it) that carry `tag`. */
function tokensOf(listed: Record<string, unknown>, tag: string): string[] {
  const allowed = Array.isArray(listed.allowed) ? (listed.allowed as unknown[]) : [];
  return allowed.filter((t): t is string => typeof t === 'string' && t.includes(`,${tag}:`));
}

/** A signed token's expiry, in Unix seconds (its first field; src/media/janusToken.ts). */
function tokenExpiry(token: string): number {
  return Number(token.slice(0, token.indexOf(',')));
}
