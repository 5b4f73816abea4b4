/**
 * The wire types of calling-backend's API, declared here so that the package depends on nothing
 * of the server. docs/protocol.md describes each field; docs/schemas/ holds the JSON Schemas.
 */

/** Every end reason a snapshot or event can carry, named from the reader's side (docs/protocol.md "End reasons"). */
export type EndReason =
  | 'localHangup'
  | 'declined'
  | 'unanswered'
  | 'remoteEnded'
  | 'callerCancelled'
  | 'answeredElsewhere'
  | 'failed'
  | 'busy'
  | 'movedElsewhere';

/** What POST /v1/calls/{id}/end accepts. */
export type RequestEndReason = EndReason;

export type CallState = 'ringing' | 'accepted' | 'ended';

/** A group call member's state (docs/group-calls.md "Member states"). */
export type MemberState = 'invited' | 'ringing' | 'joined' | 'declined' | 'missed' | 'busy' | 'left';

/** One member of a group call, as its snapshot lists it (docs/group-calls.md "Snapshot"). */
export interface CallParticipant {
  userId: string;
  state: MemberState;
  /** The installation in the call (joined), or that was (left). */
  installationId?: string;
  invitedAtMs?: number;
  /** While invited or ringing: when its ring window closes. */
  ringUntilMs?: number;
  joinedAtMs?: number;
  leftAtMs?: number;
}

/** How an invitation reached the installation that sends a ringing receipt. */
export type RingingVia = 'socket' | 'apns' | 'fcm';

export interface CallSnapshot {
  schemaVersion: 1;
  callId: string;
  /** Decimal string; grows by one with every change of the call. */
  revision: string;
  state: CallState;
  caller: { userId: string; displayName: string; handle: string };
  calleeUserId: string;
  createdAtMs: number;
  expiresAtMs: number;
  video: boolean;
  answeredByInstallationId?: string;
  acceptedAtMs?: number;
  endedAtMs?: number;
  endReason?: EndReason;
  /** A group call only: its title, `""` when it has none. A one-to-one snapshot has no title. */
  title?: string;
  /**
   * A group call only: the caller first, then every member in invitation order (`calleeUserId`
   * is then `""`). A one-to-one snapshot has no participants.
   */
  participants?: CallParticipant[];
  /**
   * GET /v1/calls/{id} of a call in progress: by userId, the live signal state each member in the
   * call has sent since it joined; absent while none has (docs/signaling.md "Live signals").
   */
  presence?: Record<string, MemberPresence>;
}

interface EventCommon {
  schemaVersion: 1;
  eventId: string;
  callId: string;
  revision: string;
}

export interface InvitationPayload extends EventCommon {
  type: 'call.invited';
  displayName: string;
  handle: string;
  /** The invitation carries issuedAtMs where the other events carry occurredAtMs (docs/protocol.md "Events"). */
  issuedAtMs: number;
  expiresAtMs: number;
  video: boolean;
}

export interface AcceptedPayload extends EventCommon {
  type: 'call.accepted';
  occurredAtMs: number;
  answeredByInstallationId: string;
}

export interface EndedPayload extends EventCommon {
  type: 'call.ended';
  occurredAtMs: number;
  reason: EndReason;
}

export interface RenamedPayload extends EventCommon {
  type: 'call.renamed';
  occurredAtMs: number;
  displayName: string;
}

/** An invitee's phone shows the call: its first ringing receipt (one-to-one calls too), sent to the caller's installations. */
export interface RingingPayload extends EventCommon {
  type: 'call.ringing';
  occurredAtMs: number;
  /** The invitee whose phone rings. */
  userId: string;
}

/** A group call member's state changed (docs/group-calls.md "Events"). */
export interface ParticipantPayload extends EventCommon {
  type: 'call.participant';
  occurredAtMs: number;
  userId: string;
  state: MemberState;
  /** The member's installation in the call, once joined. */
  installationId?: string;
}

/** A user in the call moved it to another of its installations (docs/protocol.md "Moving a call"): connect media to it anew. */
export interface MovedPayload extends EventCommon {
  type: 'call.moved';
  occurredAtMs: number;
  /** The user who moved the call. */
  userId: string;
  /** The installation that user is in the call from now. */
  installationId: string;
}

/**
 * A missed call that never rang here: do not disturb silenced it (the server's docs/call-policy.md),
 * and this is its only event, once it stopped ringing. Show it among the missed calls.
 */
export interface MissedPayload extends EventCommon {
  type: 'call.missed';
  occurredAtMs: number;
  /** The user who missed it (this user). */
  userId: string;
  callerUserId: string;
  /** The caller's name (a group call's title when it has one). */
  displayName: string;
  handle: string;
  video: boolean;
}

export type EventPayload = InvitationPayload | AcceptedPayload | EndedPayload | RenamedPayload | RingingPayload | ParticipantPayload | MovedPayload | MissedPayload;

export interface IceServer {
  urls: string[];
  username?: string;
  credential?: string;
}

/** The call's room on its SFU and this installation's credential for it (a group call, or a one-to-one call with MEDIA_MODE=sfu). */
export interface SfuAccess {
  /** `janus`: Janus's VideoRoom over its WebSocket API; `livekit`: a LiveKit server. */
  kind: 'janus' | 'livekit';
  url: string;
  /** Janus: the VideoRoom room number; LiveKit: the room name (the callId). */
  room: number | string;
  /** For this installation and this room only, until `expiresAtMs`. */
  token: string;
  /** Janus: the publisher `id` to join with (the server kicks it when the installation leaves the call). */
  participantId?: number;
}

/** POST /v1/calls/{id}/media-session; `iceServers` is empty when the server has no TURN_URLS. */
export interface MediaSession {
  iceServers: IceServer[];
  expiresAtMs: number;
  /** Present when the server routes the call's media through an SFU (docs/api.md "Media session"). */
  sfu?: SfuAccess;
}

/** `iosAlert`: the app's regular APNs device token, for missed-call alerts only (the server's docs/protocol.md "Missed-call alerts"). */
export type PushTokenKind = 'iosVoip' | 'androidPush' | 'iosAlert';

export interface PushTokenRegistration {
  installationId: string;
  kind: PushTokenKind;
  appId: string;
  iosEnvironment?: 'production' | 'development';
  tokenSuffix: string;
  updatedAtMs: number;
}

export type GapReason = 'trimmed' | 'reset';

/** GET /v1/call-events: `hasMore` says whether another page follows right now. */
export type CallEventsPage =
  | { events: EventPayload[]; nextCursor: string; hasMore: boolean; gap?: undefined }
  | { gap: { reason: GapReason }; events: []; nextCursor: string; hasMore: boolean };

/** One call in this user's history, from this user's point of view (GET /v1/calls; docs/call-history.md). */
export interface CallHistoryEntry {
  callId: string;
  /** `outgoing`: this user called; `incoming`: this user was called. */
  direction: 'outgoing' | 'incoming';
  /** The other party. */
  peerUserId: string;
  callerUserId: string;
  calleeUserId: string;
  video: boolean;
  createdAtMs: number;
  /** null: never answered. */
  acceptedAtMs: number | null;
  answeredByInstallationId: string | null;
  endedAtMs: number;
  /** The end reason as this user's devices were told it. */
  endReason: EndReason;
  endedBy: 'caller' | 'callee' | 'system';
  /** A call to this user that nobody answered: it rang out, or the caller cancelled it. */
  missed: boolean;
  /** In a missed record only: whether a missed-call alert for it was accepted by APNs or FCM for one of this user's installations. */
  missedCallAlert?: boolean;
  ringingMs: number;
  talkMs: number;
  /** In this user's own record of an incoming call only: its call policy stopped the call, which never rang. */
  screened?: Screened;
}

/** Why a user's call policy kept a call from ringing that user (the server's docs/call-policy.md). */
export type Screened = 'blocked' | 'notAllowed' | 'silenced' | 'doNotDisturb';

/** Do not disturb: `silence` lets a call ring out for the caller and records it as missed; `reject` answers busy. */
export interface DoNotDisturb {
  /** On now: turned on, and its `untilMs` (if any) not yet passed. */
  on: boolean;
  /** When it ends by itself; null: when turned off. */
  untilMs: number | null;
  action: 'silence' | 'reject';
  /** Users whose calls ring through it, oldest first. */
  favouriteUserIds: string[];
}

/** Who may call the user: `everyone` (the default), `contacts` (the allow list only) or `nobody`. */
export type CallPolicyMode = 'everyone' | 'contacts' | 'nobody';

/** GET and PUT /v1/call-policy: the user's call policy. */
export interface CallPolicy {
  userId: string;
  mode: CallPolicyMode;
  /** The block list, oldest first: these users' calls never ring, whatever the mode. */
  blockedUserIds: string[];
  /** How many users the allow list holds (the app's backend keeps it). */
  allowListSize: number;
  doNotDisturb: DoNotDisturb;
}

/**
 * PUT /v1/call-policy: the mode and do not disturb when given; `unblock` is applied before `block`,
 * `unfavourite` before `favourite`. At most 1,000 userIds each.
 */
export interface CallPolicyEdit {
  mode?: CallPolicyMode;
  block?: string[];
  unblock?: string[];
  /** On (until `untilMs`, a time to come within a year, or until turned off) or off. */
  doNotDisturb?: { on: boolean; untilMs?: number; action?: 'silence' | 'reject' };
  favourite?: string[];
  unfavourite?: string[];
}

/** GET /v1/calls: newest first; `nextCursor` null on the last page. */
export interface CallHistoryPage {
  calls: CallHistoryEntry[];
  nextCursor: string | null;
}

/** An RFC 9457 problem as the server sends it. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  snapshot?: CallSnapshot;
}

/** An in-call message from the other party (docs/signaling.md "In-call messages"). */
export interface CallMessage {
  schemaVersion: 1;
  eventId: string;
  type: 'call.message';
  callId: string;
  occurredAtMs: number;
  fromInstallationId: string;
  /** The sender's sequence number on this call, from 1. */
  seq: number;
  payload: Record<string, unknown>;
}

/** The signal kinds whose current value the call keeps in its `presence`. */
export type StateSignalKind = 'muted' | 'speaking' | 'handRaised' | 'video';

/** A member's kept live signal state (CallSnapshot `presence`): the kinds it has sent. */
export type MemberPresence = Partial<Record<StateSignalKind, boolean>>;

/**
 * A live signal to send (docs/signaling.md "Live signals"): a state kind with a boolean, a
 * `reaction` (1 to 32 characters), or a `custom` JSON value of at most 1 KiB.
 */
export type SignalBody = { kind: StateSignalKind; value: boolean } | { kind: 'reaction'; value: string } | { kind: 'custom'; value: unknown };

/** Another joined member's live signal, as received: not stored, never replayed. */
export type LiveSignal = SignalBody & {
  callId: string;
  /** The sender. */
  userId: string;
  /** When the server took it. */
  atMs: number;
};

/** A signal the server dropped (an `error` frame `signal_refused`). */
export interface SignalRefusal {
  callId: string;
  reason: 'not_found' | 'not_joined' | 'rate_limited' | 'unavailable';
  detail: string;
  retryAfterMs?: number;
}

/** An in-call message the server stored (POST /v1/calls/{id}/messages, or a `message` frame). */
export interface MessageSent {
  eventId: string;
  callId: string;
  seq: number;
  occurredAtMs: number;
}

/** A command's outcome as a `reply` frame carries it: its HTTP route's status and body. */
export interface CommandReply {
  status: number;
  body: unknown;
  retryAfterS?: number;
}
