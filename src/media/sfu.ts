/**
 * What a call's media goes through (docs/api.md "Media session"): `p2p`, one peer connection
 * between the two devices over TURN, or `sfu`, each participant's connection to a selective
 * forwarding unit that holds one room per call. An SFU adapter names the room, decides who may
 * enter it and, where the SFU needs it, makes and removes the room.
 */

export interface SfuParticipant {
  callId: string;
  userId: string;
  installationId: string;
}

/** The `sfu` member of a media-session reply: where to connect, which room, and the credential. */
export interface SfuAccess {
  /** `janus` or `livekit`: which client protocol `url` speaks. */
  kind: SfuKind;
  url: string;
  /** Janus: the VideoRoom room number; LiveKit: the room name (the callId). */
  room: number | string;
  /** Opens `room` for this participant only, until the media session's `expiresAtMs`. */
  token: string;
  /**
   * Janus: the VideoRoom publisher id the participant joins with (`id` of its `join`), which the
   * backend kicks when the participant leaves the call (docs/api.md "Media session").
   */
  participantId?: number;
}

export type SfuKind = 'janus' | 'livekit';

export interface Sfu {
  readonly kind: SfuKind;
  /**
   * Makes the call's room, or finds it made (idempotent: a relay retry creates no second room).
   * Absent where the SFU makes rooms itself on the first join (LiveKit).
   */
  openRoom?(callId: string): Promise<'created' | 'existed'>;
  /** Removes the call's room and everyone in it; 'absent' when there was none. */
  closeRoom?(callId: string): Promise<'destroyed' | 'absent'>;
  /**
   * Takes participants who left the call out of its room: their credentials stop opening it and
   * those in it are kicked (idempotent; nothing when the room is gone). Absent where the backend
   * does not reach the SFU (LiveKit: the credential expires with the media session).
   */
  evict?(callId: string, gone: readonly SfuParticipant[]): Promise<void>;
  /** A credential for this participant and this room only, expiring at `expiresAtMs`. */
  admit(participant: SfuParticipant, expiresAtMs: number): Promise<SfuAccess>;
  /** Whether every instance answers (readiness; docs/operations.md "SFU media"). */
  ready(): Promise<boolean>;
}

/** The counters the SFU adapters feed (docs/operations.md "Observability"). */
export interface SfuObserver {
  room(op: 'created' | 'destroyed'): void;
  join(): void;
  kick(): void;
  error(op: string): void;
}

/** An SFU whose rooms the backend makes, empties and removes (Janus; not LiveKit). */
export type RoomKeepingSfu = Sfu & Required<Pick<Sfu, 'openRoom' | 'closeRoom' | 'evict'>>;

export const keepsRooms = (sfu: Sfu | undefined): sfu is RoomKeepingSfu => sfu?.openRoom !== undefined && sfu.closeRoom !== undefined && sfu.evict !== undefined;
