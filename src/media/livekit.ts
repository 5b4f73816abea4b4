import { AccessToken } from 'livekit-server-sdk';
import type { Sfu, SfuAccess, SfuObserver, SfuParticipant } from './sfu.js';

export interface LiveKitOptions {
  /** What clients connect to (LIVEKIT_URL). */
  url: string;
  apiKey: string;
  apiSecret: string;
}

/** A LiveKit participant identity: the user and its installation (docs/api.md "Media session"). */
export const liveKitIdentity = (p: Pick<SfuParticipant, 'userId' | 'installationId'>) => `${p.userId}#${p.installationId}`;

/**
 * LiveKit as a call's SFU, for teams that already run it (docs/operations.md "SFU media"): an
 * access token per participant, signed with the deployment's API key, whose only grant is to join
 * the room named by the callId. LiveKit makes the room on the first join and closes it when it is
 * empty, so the backend neither makes nor removes rooms, and talks to no LiveKit server.
 */
export class LiveKitSfu implements Sfu {
  readonly kind = 'livekit';

  constructor(
    private readonly opts: LiveKitOptions,
    private readonly observe: SfuObserver,
  ) {}

  async admit(p: SfuParticipant, expiresAtMs: number): Promise<SfuAccess> {
    // The SDK counts the lifetime in whole seconds from the second it signs in: this ends it at
    // `expiresAtMs`, or a second earlier should the second turn in between.
    const ttlSeconds = Math.max(1, Math.floor(expiresAtMs / 1000) - Math.floor(Date.now() / 1000));
    const at = new AccessToken(this.opts.apiKey, this.opts.apiSecret, { identity: liveKitIdentity(p), ttl: ttlSeconds });
    at.addGrant({ room: p.callId, roomJoin: true, canPublish: true, canSubscribe: true, canPublishData: true });
    const token = await at.toJwt();
    this.observe.join();
    return { kind: 'livekit', url: this.opts.url, room: p.callId, token };
  }

  async ready(): Promise<boolean> {
    return true;
  }
}
