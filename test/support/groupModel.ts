/**
 * A pure in-memory model of a group call, written from docs/group-calls.md and docs/protocol.md
 * "Group call members" (never from src/): what each request answers, what the snapshot shows
 * after it, and which events each installation receives. test/e2e/group-model.test.ts runs random
 * interleavings against the real server and compares both after every step.
 *
 * Users are numbers: 0 is the caller (its installation 0 is the calling one), 1.. the others.
 * Installations are numbers within their user.
 */

export type MemberState = 'invited' | 'ringing' | 'joined' | 'declined' | 'missed' | 'busy' | 'left';
export type CallState = 'ringing' | 'accepted' | 'ended';
type Ender = 'caller' | 'system';

export interface ModelMember {
  user: number;
  state: MemberState;
  /** The installation in the call (joined), kept while `left` (docs/group-calls.md "Snapshot"). */
  inst?: number;
  /** Rung with the short ring window: rings out at the next `ringOut` step. */
  doomed: boolean;
}

/** One event as the model predicts it: the fields the rules decide. */
export interface ModelEvent {
  type: 'call.invited' | 'call.participant' | 'call.ringing' | 'call.ended' | 'call.moved';
  revision: number;
  userId?: string;
  state?: MemberState;
  reason?: string;
}

/** What a request must answer: its status, and the problem's code when refused. */
export interface Outcome {
  status: number;
  code?: string;
}

const OK: Outcome = { status: 200 };
const refused = (status: number, code: string): Outcome => ({ status, code });
const ringing = (m: ModelMember) => m.state === 'invited' || m.state === 'ringing';
const ECHO_REASONS = new Set(['remoteEnded', 'callerCancelled', 'answeredElsewhere', 'movedElsewhere']);

export class GroupModel {
  state: CallState = 'ringing';
  revision = 1;
  members: ModelMember[];
  /** How the call ended: the reason as stored and who ended it (docs/protocol.md "End reasons"). */
  end?: { reason: string; by: Ender; byInst?: number; accepted: boolean };
  /** Expected events per user, per installation, in the order they must arrive. */
  readonly events: ModelEvent[][][];

  constructor(
    readonly userIds: readonly string[],
    readonly installations: number,
    /** GROUP_CALL_MAX_MEMBERS: members besides the caller. */
    readonly maxMembers: number,
    invitees: readonly number[],
    short: boolean,
  ) {
    this.events = userIds.map(() => Array.from({ length: installations }, () => []));
    this.members = [{ user: 0, state: 'joined', inst: 0, doomed: false }, ...invitees.map((user) => ({ user, state: 'invited' as const, doomed: short }))];
    // "Every installation of every invitee gets call.invited."
    for (const m of this.members.slice(1)) this.toAll(m.user, { type: 'call.invited', revision: 1 });
  }

  member(user: number): ModelMember | undefined {
    return this.members.find((m) => m.user === user);
  }

  /** Members rung with the short window and still ringing: the next step must ring them out. */
  doomed(): ModelMember[] {
    return this.state === 'ended' ? [] : this.members.filter((m) => m.doomed && ringing(m));
  }

  // ---- requests -------------------------------------------------------------------------

  /**
   * docs/group-calls.md "Joining"; `expected`: an `expectedRevision` of the call's current
   * revision or a stale one ("works as for a one-to-one answer": a mismatch is 409
   * revision_conflict, and the same installation answering again is still the winner).
   */
  join(user: number, inst: number, expected?: 'current' | 'stale'): Outcome {
    const m = this.member(user);
    if (!m) return refused(404, 'not_found');
    if (m.state === 'joined') return m.inst === inst ? OK : refused(409, 'answer_conflict');
    if (this.state === 'ended') return refused(409, 'answer_conflict');
    if (expected === 'stale') return refused(409, 'revision_conflict');
    const from = m.state;
    m.state = 'joined';
    m.inst = inst;
    m.doomed = false;
    if (this.state === 'ringing') this.state = 'accepted';
    const revision = ++this.revision;
    // "Its other installations get call.ended answeredElsewhere and stop ringing."
    if (from === 'invited' || from === 'ringing') this.toAll(user, { type: 'call.ended', revision, reason: 'answeredElsewhere' }, inst);
    this.tellInCall(m, revision);
    return OK;
  }

  /** docs/group-calls.md "Leaving, declining, cancelling". */
  endRequest(user: number, inst: number, reason: string, forAll: boolean): Outcome {
    const m = this.member(user);
    if (!m) return refused(404, 'not_found');
    if (this.state === 'ended' || ECHO_REASONS.has(reason)) return OK;
    if (user === 0) {
      // The caller reads the reason it reported, as in a one-to-one call (docs/protocol.md "The call machine").
      // "the caller | nobody joined yet | the call ends; every member still ringing gets callerCancelled"
      if (this.state === 'ringing') return this.endCall(reason, 'caller', inst), OK;
      if (m.state !== 'joined' || m.inst !== inst) return OK;
      if (forAll) return this.endCall(reason, 'caller', inst), OK;
    }
    if (m.state === 'joined') {
      if (m.inst !== inst) return OK;
      m.state = 'left';
      this.memberChange([m]);
      return OK;
    }
    if (ringing(m)) {
      // "busy and unanswered from its phone are kept as busy and missed"
      m.state = reason === 'busy' ? 'busy' : reason === 'unanswered' ? 'missed' : 'declined';
      // "its other installations get call.ended with the reason its phone gave"
      this.memberChange([m], { inst, reason: reason === 'busy' || reason === 'unanswered' ? reason : 'declined' });
      return OK;
    }
    return OK;
  }

  /**
   * docs/protocol.md "Moving a call": only while the call is accepted; to the installation
   * already in the call, nothing; a stale `expectedRevision` is 409 revision_conflict; a member
   * not in the call (ringing or out) is 409 not_in_call. "The installation it leaves gets
   * call.ended with movedElsewhere; everyone else in the call gets call.moved."
   */
  move(user: number, inst: number, expected: 'current' | 'stale'): Outcome {
    const m = this.member(user);
    if (!m) return refused(404, 'not_found');
    if (this.state !== 'accepted') return refused(409, 'not_in_call');
    if (m.state === 'joined' && m.inst === inst) return OK;
    if (expected === 'stale') return refused(409, 'revision_conflict');
    if (m.state !== 'joined') return refused(409, 'not_in_call');
    const left = m.inst!;
    m.inst = inst;
    const revision = ++this.revision;
    this.to(user, left, { type: 'call.ended', revision, reason: 'movedElsewhere' });
    for (const o of this.members) {
      if (o.state === 'joined' && o.user !== user) this.to(o.user, o.inst!, { type: 'call.moved', revision, userId: this.userIds[user] });
    }
    return OK;
  }

  /** docs/group-calls.md "Inviting more". */
  invite(user: number, inst: number, invitees: readonly number[], short: boolean): Outcome {
    if (invitees.includes(user)) return refused(400, 'invalid_request');
    const me = this.member(user);
    if (!me) return refused(404, 'not_found');
    if (this.state === 'ended') return refused(409, 'call_not_active');
    if (me.state !== 'joined' || me.inst !== inst) return refused(403, 'forbidden');
    const added = invitees.filter((u) => !this.member(u));
    if (this.members.length - 1 + added.length > this.maxMembers) return refused(409, 'group_call_full');
    const subjects: ModelMember[] = [];
    for (const u of invitees) {
      let m = this.member(u);
      if (!m) this.members.push((m = { user: u, state: 'left', doomed: false }));
      // "Members ringing or in the call are left as they are."
      if (ringing(m) || m.state === 'joined') continue;
      m.state = 'invited';
      m.inst = undefined;
      m.doomed = short;
      subjects.push(m);
    }
    if (subjects.length === 0) return OK;
    const revision = ++this.revision;
    for (const m of subjects) {
      this.toAll(m.user, { type: 'call.invited', revision });
      this.tellInCall(m, revision);
    }
    return OK;
  }

  /** docs/group-calls.md "Ringing receipts". */
  receipt(user: number): Outcome {
    const m = this.member(user);
    if (!m) return refused(404, 'not_found');
    if (user === 0) return refused(403, 'forbidden');
    if (m.state !== 'invited') return OK;
    m.state = 'ringing';
    const revision = ++this.revision;
    // call.ringing to every installation of the caller; call.participant to everyone in the call, the caller too.
    this.toAll(0, { type: 'call.ringing', revision, userId: this.userIds[user] });
    this.tellInCall(m, revision);
    return OK;
  }

  /** The ring sweeps ring out every doomed member still ringing ("missed"), in one change. */
  ringOut(): void {
    const due = this.doomed();
    if (due.length === 0) return;
    for (const m of due) m.state = 'missed';
    this.memberChange(due);
  }

  // ---- what follows a change ---------------------------------------------------------------

  /** A change of the members' states: its events, then the end it may bring ("When a group call ends"). */
  private memberChange(subjects: ModelMember[], stoppedBy?: { inst: number; reason: string }): void {
    const revision = ++this.revision;
    for (const m of subjects) {
      if (stoppedBy) this.toAll(m.user, { type: 'call.ended', revision, reason: stoppedBy.reason }, stoppedBy.inst);
      else if (m.state === 'missed') this.toAll(m.user, { type: 'call.ended', revision, reason: 'unanswered' });
      this.tellInCall(m, revision);
    }
    this.endIfOver();
  }

  private endIfOver(): void {
    const joined = this.members.filter((m) => m.state === 'joined').length;
    if (this.state === 'accepted') {
      if (joined < 2) this.endCall('remoteEnded', 'system');
      return;
    }
    if (this.members.some(ringing)) return;
    const invitees = this.members.slice(1);
    const reason = invitees.every((m) => m.state === 'busy') ? 'busy' : invitees.some((m) => m.state === 'missed') ? 'unanswered' : 'declined';
    this.endCall(reason, 'system');
  }

  /**
   * "When the call ends, members still ringing become missed and members in it become left."
   * The end reaches every member ringing or in the call then, but the installation that ended it,
   * each with its reason (docs/protocol.md "End reasons", the member on the callee side).
   */
  private endCall(reason: string, by: Ender, byInst?: number): void {
    const accepted = this.state === 'accepted';
    const revision = ++this.revision;
    this.state = 'ended';
    this.end = { reason, by, byInst, accepted };
    for (const m of this.members) {
      const was = m.state;
      if (!ringing(m) && was !== 'joined') continue;
      m.state = was === 'joined' ? 'left' : 'missed';
      const event: ModelEvent = { type: 'call.ended', revision, reason: this.reasonFor(m.user) };
      if (was === 'joined') {
        if (!(m.user === 0 && by === 'caller' && m.inst === byInst)) this.to(m.user, m.inst!, event);
      } else this.toAll(m.user, event);
    }
  }

  /** The end reason as `user` reads it (docs/protocol.md "End reasons"). */
  reasonFor(user: number): string | undefined {
    if (!this.end) return undefined;
    const { reason, by, accepted } = this.end;
    const side = user === 0 ? 'caller' : 'callee';
    if (by === 'system' || by === side) return reason;
    return accepted ? 'remoteEnded' : 'callerCancelled';
  }

  // ---- who receives what ----------------------------------------------------------------

  /** call.participant about `about` to every member in the call but it (and but `except`). */
  private tellInCall(about: ModelMember, revision: number): void {
    for (const m of this.members) {
      if (m.state !== 'joined' || m.user === about.user) continue;
      this.to(m.user, m.inst!, { type: 'call.participant', revision, userId: this.userIds[about.user], state: about.state });
    }
  }

  private toAll(user: number, event: ModelEvent, except?: number): void {
    for (let i = 0; i < this.installations; i++) if (i !== except) this.to(user, i, event);
  }

  private to(user: number, inst: number, event: ModelEvent): void {
    this.events[user]![inst]!.push(event);
  }
}
