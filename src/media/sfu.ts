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
  /** A credential for this participant and this room only, expiring at `expiresAtMs`. */
  admit(participant: SfuParticipant, expiresAtMs: number): Promise<SfuAccess>;
  /** Whether every instance answers (readiness; docs/operations.md "SFU media"). */
  ready(): Promise<boolean>;
}

/** The counters the SFU adapters feed (docs/operations.md "Observability"). */
export interface SfuObserver {
  room(op: 'created' | 'destroyed'): void;
  join(): void;
  error(op: string): void;
}

/** An SFU whose rooms the backend makes and removes (Janus; not LiveKit). */
export type RoomKeepingSfu = Sfu & Required<Pick<Sfu, 'openRoom' | 'closeRoom'>>;

export const keepsRooms = (sfu: Sfu | undefined): sfu is RoomKeepingSfu => sfu?.openRoom !== undefined && sfu.closeRoom !== undefined;
