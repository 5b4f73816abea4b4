// A group call on the softphone page (docs/group-calls.md): its members and their states, kept
// from the snapshots the page gets (create, receipt, join, invite, end) and from the call.participant
// and call.ringing events; what the page says about the call; the members list it shows.

/**
 * The members of one group call. A change is applied only when it is not older than what the
 * page already shows for that member (revision order), so a late snapshot cannot undo an event.
 */
export class Members {
  constructor() {
    /** userId → { state, revision (BigInt) }, in the snapshot's order (the caller first). */
    this.byUser = new Map();
    /** userId → { muted, handRaised, … }: live signal state (docs/signaling.md "Live signals"). */
    this.presence = new Map();
  }

  /** The snapshot's `presence` (GET /v1/calls/{id}): the current state, replacing what the page had. */
  applyPresence(presence) {
    this.presence = new Map(Object.entries(presence ?? {}));
  }

  /** A live signal from another member: a state kind updates its entry. */
  applySignal(signal) {
    if (typeof signal.value !== 'boolean') return;
    this.presence.set(signal.userId, { ...this.presence.get(signal.userId), [signal.kind]: signal.value });
  }

  /** A group call's snapshot: every participant with its state. */
  applySnapshot(snapshot) {
    const revision = BigInt(snapshot.revision);
    for (const p of snapshot.participants ?? []) this.set(p.userId, p.state, revision);
  }

  /** A call.participant event, or a call.ringing one (the caller learns of receipts by it). */
  applyEvent(e) {
    const revision = BigInt(e.revision);
    if (e.type === 'call.participant') this.set(e.userId, e.state, revision);
    else if (e.type === 'call.ringing' && this.byUser.get(e.userId)?.state === 'invited') this.set(e.userId, 'ringing', revision);
  }

  /** The call ended (docs/group-calls.md "When a group call ends"): those ringing missed it, those in it left. */
  endAll(revision) {
    const after = { invited: 'missed', ringing: 'missed', joined: 'left' };
    for (const [userId, m] of this.byUser) if (after[m.state]) this.set(userId, after[m.state], revision);
  }

  set(userId, state, revision) {
    const known = this.byUser.get(userId);
    if (known && revision < known.revision) return;
    this.byUser.set(userId, { state, revision });
    // A member out of the call has no live state (its state is cleared when it leaves).
    if (state !== 'joined') this.presence.delete(userId);
  }

  /** Members in the call besides `userId`. */
  joinedBesides(userId) {
    return [...this.byUser].filter(([u, m]) => u !== userId && m.state === 'joined').length;
  }

  list() {
    return [...this.byUser].map(([userId, m]) => ({ userId, state: m.state, presence: this.presence.get(userId) ?? {} }));
  }
}

const MEMBER_TEXT = {
  invited: 'invited',
  ringing: 'ringing',
  joined: 'in the call',
  declined: 'declined',
  missed: 'missed it',
  busy: 'busy',
  left: 'left',
};

/** The members list: one item per member, its state in `data-state` (for scripts and tests). */
export function renderMembers(ol, call, selfUserId) {
  ol.replaceChildren(
    ...call.members.list().map(({ userId, state, presence }) => {
      const li = document.createElement('li');
      li.dataset.userId = userId;
      li.dataset.state = state;
      li.dataset.muted = String(!!presence.muted);
      li.dataset.handRaised = String(!!presence.handRaised);
      const who = document.createElement('span');
      who.textContent = `${userId}${userId === selfUserId ? ' (you)' : ''}${userId === call.callerUserId ? ' · caller' : ''}`;
      const pill = document.createElement('span');
      pill.className = 'pill';
      pill.dataset.state = state;
      pill.textContent = MEMBER_TEXT[state] ?? state;
      const signals = document.createElement('span');
      signals.className = 'signals';
      signals.textContent = `${presence.muted ? '🔇' : ''}${presence.handRaised ? '✋' : ''}`;
      li.append(who, pill, signals);
      return li;
    }),
  );
}

/** The end line of a group call, from this page's side (docs/group-calls.md "When a group call ends"). */
export const GROUP_END_TEXT = {
  localHangup: (c) => (c.endedForAll ? 'You ended the call for everyone' : c.role === 'caller' && !c.everJoined ? 'You cancelled the call' : 'You left the call'),
  remoteEnded: () => 'The call ended',
  declined: (c) => (c.role === 'caller' ? 'Everyone declined' : 'You declined'),
  callerCancelled: (c) => `${c.callerName ?? c.peer} cancelled the call`,
  unanswered: (c) => (c.role === 'caller' ? 'No answer' : 'Missed call'),
  answeredElsewhere: () => 'Joined on another device',
  busy: (c) => (c.role === 'caller' ? 'Everyone is busy' : 'Busy'),
  failed: () => 'The call failed',
};

/** User IDs typed into a field: separated by commas or spaces, each once. */
export function userIdsOf(text) {
  return [...new Set(text.split(/[\s,]+/).filter(Boolean))];
}
