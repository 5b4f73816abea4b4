import fc from 'fast-check';
import { expect } from 'vitest';
import { uid } from './fixtures.js';
import { GroupModel, type ModelEvent, type Outcome } from './groupModel.js';

/**
 * Random interleavings of a group call's requests against the pure model (./groupModel.ts),
 * written once and run at two levels (docs/development.md "Where a rule is tested"):
 *  - test/integration/group-machine-model.test.ts: the command layer and the call scripts in the
 *    test's own process against a redis-server, with each installation's events projected from
 *    the call's outbox by the audience rules: many runs, in milliseconds each;
 *  - test/e2e/group-model.test.ts: the same steps over HTTP and socket frames against real
 *    server processes, with the events as the sockets receive them: fewer runs.
 * A Driver is what differs between the two.
 */

export type Transport = 'http' | 'socket';

export interface Answer {
  status: number;
  body: Record<string, any>;
}

export interface Driver {
  readonly userIds: readonly string[];
  installationId(user: number, inst: number): string;
  /** A request from installation `inst` of `user`; `short`: through the short ring window. */
  send(user: number, inst: number, path: string, body: Record<string, unknown>, transport: Transport, short?: boolean): Promise<Answer>;
  /** The call's snapshot as the caller reads it. */
  snapshot(): Promise<Record<string, any>>;
  /** Waits until the ring sweep has rung out `userIds` (rung with the short window). */
  ringOut(userIds: readonly string[]): Promise<void>;
  /** Each installation's events of the call, by user and installation, once the model's counts (or nothing more) arrived. */
  events(expected: readonly (readonly number[])[]): Promise<Record<string, unknown>[][][]>;
}

/** One run's real side: the driver and the log of the steps taken. */
export interface Real {
  driver: Driver;
  log: string[];
  /** The previous request, for `replay` (undefined after a step that was not a request). */
  last?: { user: number; inst: number; path: string; body: Record<string, unknown>; transport: Transport; answer: Answer };
}

/** What the runs did: each request's route and status, and how each call ended (printed, and checked for variety). */
export class Tally {
  readonly counts = new Map<string, number>();
  add(key: string): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }
  toString(): string {
    return [...this.counts].sort().map(([k, n]) => `${k}: ${n}`).join(', ');
  }
  /**
   * The runs reached past the refusals: each of `keys` happened (by default joins won and lost,
   * members declined and left, invitations and receipts taken), and calls ended more than one way.
   */
  expectVariety(keys = ['answer 200', 'answer 409', 'end 200', 'invite 200', 'ringing 200']): void {
    for (const key of keys) expect(this.counts.get(key) ?? 0, key).toBeGreaterThan(0);
    expect([...this.counts.keys()].filter((k) => k.startsWith('call ended')).length).toBeGreaterThanOrEqual(2);
  }
}

/** The request's answer is the model's outcome (a problem's code, when refused). */
export function expectOutcome(got: Answer, want: Outcome, what: string): void {
  expect({ status: got.status, code: got.status >= 400 ? got.body?.code : undefined }, what).toEqual({ status: want.status, code: want.code });
}

/** The snapshot, read by the caller, is the model's: revision, state, end reason, members. */
export async function expectSnapshot(m: GroupModel, r: Real, what: string): Promise<void> {
  const s = await r.driver.snapshot();
  const instId = (user: number, inst: number | undefined) => (inst === undefined ? undefined : r.driver.installationId(user, inst));
  const want = {
    revision: String(m.revision),
    state: m.state,
    endReason: m.reasonFor(0),
    participants: m.members.map((p) => ({
      userId: m.userIds[p.user],
      state: p.state,
      installationId: p.state === 'joined' || p.state === 'left' ? instId(p.user, p.inst) : undefined,
    })),
  };
  const got = {
    revision: s.revision,
    state: s.state,
    endReason: s.endReason,
    participants: (s.participants as Record<string, any>[]).map((p) => ({ userId: p.userId, state: p.state, installationId: p.installationId })),
  };
  expect(got, `${what}\n${r.log.join('\n')}`).toEqual(want);
}

/** A step: the model's prediction, then the real request, then the comparison. */
abstract class Step implements fc.AsyncCommand<GroupModel, Real> {
  constructor(protected readonly tally: Tally) {}
  abstract check(m: Readonly<GroupModel>): boolean;
  abstract apply(m: GroupModel, r: Real): Promise<void>;
  abstract toString(): string;
  /** Picks what the step depends on from the model, before it runs (a member by its place). */
  resolve(_m: GroupModel): void {}
  async run(m: GroupModel, r: Real): Promise<void> {
    this.resolve(m);
    r.log.push(this.toString());
    await this.apply(m, r);
    // While a short ring window is open the sweep may ring it out any moment: the ring-out step
    // that must come next compares the snapshot instead.
    if (m.doomed().length === 0) await expectSnapshot(m, r, `after ${this.toString()}`);
  }
}

/** Any step but the ring-out waits while a short ring window is open (it would race the sweep). */
const noneDoomed = (m: Readonly<GroupModel>) => (m as GroupModel).doomed().length === 0;

/** A user by number, or the invitee at a place in the member list (modulo its length), so most steps come from members. */
type Who = number | { member: number };
const whoIs = (m: GroupModel, who: Who) => (typeof who === 'number' ? who : m.members[1 + (who.member % (m.members.length - 1))]!.user);

/** `expectedRevision` for `expected`: the call's current revision, or a stale one (the one before; revisions start at 1: then the next). */
const revisionFor = (m: GroupModel, expected: 'current' | 'stale') => String(expected === 'current' ? m.revision : m.revision > 1 ? m.revision - 1 : m.revision + 1);

abstract class Request extends Step {
  user = -1;
  constructor(
    tally: Tally,
    readonly who: Who,
    readonly inst: number,
    readonly transport: Transport,
  ) {
    super(tally);
  }
  override resolve(m: GroupModel): void {
    this.user = whoIs(m, this.who);
  }
  check(m: Readonly<GroupModel>): boolean {
    return noneDoomed(m);
  }
  /** Sends `body` to `path` as this step's installation, and checks the answer is `want`. */
  protected async request(r: Real, path: string, body: Record<string, unknown>, want: Outcome, short = false): Promise<Answer> {
    const full = { operationId: uid('op'), ...body };
    const transport = short ? 'http' : this.transport;
    const answer = await r.driver.send(this.user, this.inst, path, full, transport, short);
    expectOutcome(answer, want, `${this.toString()}\n${r.log.join('\n')}`);
    this.tally.add(`${path} ${answer.status}`);
    r.last = { user: this.user, inst: this.inst, path, body: full, transport, answer };
    return answer;
  }
  protected by(): string {
    return `u${this.user}.${this.inst} ${this.transport}`;
  }
}

/** A join, now and then with `expectedRevision`: the call's current one, or another. */
class Join extends Request {
  constructor(tally: Tally, who: Who, inst: number, transport: Transport, readonly expected?: 'current' | 'stale') {
    super(tally, who, inst, transport);
  }
  async apply(m: GroupModel, r: Real) {
    const body = { installationId: r.driver.installationId(this.user, this.inst), ...(this.expected ? { expectedRevision: revisionFor(m, this.expected) } : {}) };
    await this.request(r, 'answer', body, m.join(this.user, this.inst, this.expected));
  }
  toString() {
    return `join(${this.by()}${this.expected ? `, ${this.expected} revision` : ''})`;
  }
}

/** A member moves the call to this installation (docs/protocol.md "Moving a call"), with the current revision or a stale one. */
class Move extends Request {
  constructor(tally: Tally, who: Who, inst: number, transport: Transport, readonly expected: 'current' | 'stale') {
    super(tally, who, inst, transport);
  }
  async apply(m: GroupModel, r: Real) {
    const body = { installationId: r.driver.installationId(this.user, this.inst), expectedRevision: revisionFor(m, this.expected) };
    await this.request(r, 'move', body, m.move(this.user, this.inst, this.expected));
  }
  toString() {
    return `move(${this.by()}, ${this.expected} revision)`;
  }
}

class End extends Request {
  constructor(tally: Tally, who: Who, inst: number, transport: Transport, readonly reason: string, readonly forAll: boolean) {
    super(tally, who, inst, transport);
  }
  async apply(m: GroupModel, r: Real) {
    await this.request(r, 'end', { reason: this.reason, ...(this.forAll ? { forAll: true } : {}) }, m.endRequest(this.user, this.inst, this.reason, this.forAll));
  }
  toString() {
    return `end(${this.by()}, ${this.reason}${this.forAll ? ', forAll' : ''})`;
  }
}

class Invite extends Request {
  constructor(tally: Tally, who: Who, inst: number, transport: Transport, readonly invitees: number[], readonly short: boolean) {
    super(tally, who, inst, transport);
  }
  async apply(m: GroupModel, r: Real) {
    const userIds = this.invitees.map((u) => r.driver.userIds[u]);
    await this.request(r, 'invite', { userIds }, m.invite(this.user, this.inst, this.invitees, this.short), this.short);
  }
  toString() {
    return `invite(${this.by()}, [${this.invitees.join(',')}]${this.short ? ', short' : ''})`;
  }
}

class Receipt extends Request {
  constructor(tally: Tally, who: Who, inst: number, transport: Transport, readonly path: 'socket' | 'apns' | 'fcm') {
    super(tally, who, inst, transport);
  }
  async apply(m: GroupModel, r: Real) {
    await this.request(r, 'ringing', { via: this.path }, m.receipt(this.user));
  }
  toString() {
    return `ringing(${this.by()}, ${this.path})`;
  }
}

/** Both installations of a member join at once, one over HTTP, one as a frame: exactly one outcome. */
class RaceJoin extends Step {
  user = -1;
  constructor(tally: Tally, readonly who: Who) {
    super(tally);
  }
  override resolve(m: GroupModel): void {
    this.user = whoIs(m, this.who);
  }
  check(m: Readonly<GroupModel>) {
    return noneDoomed(m);
  }
  async apply(m: GroupModel, r: Real) {
    const answers = await Promise.all(
      [0, 1].map((i) => r.driver.send(this.user, i, 'answer', { operationId: uid('op'), installationId: r.driver.installationId(this.user, i) }, i === 0 ? 'http' : 'socket')),
    );
    r.last = undefined;
    const member = m.member(this.user);
    const where = `${this.toString()}: ${JSON.stringify(answers.map((a) => a.status))}\n${r.log.join('\n')}`;
    if (!member) {
      for (const a of answers) expectOutcome(a, { status: 404, code: 'not_found' }, where);
      return;
    }
    if (member.state === 'joined' || m.state === 'ended') {
      for (const [i, a] of answers.entries()) expectOutcome(a, m.join(this.user, i), where);
      return;
    }
    // One winner for the member, whichever came first; the other gets 409 with the winner.
    const winner = answers.findIndex((a) => a.status === 200);
    expect(winner, where).toBeGreaterThanOrEqual(0);
    expectOutcome(answers[1 - winner]!, { status: 409, code: 'answer_conflict' }, where);
    expectOutcome(answers[winner]!, m.join(this.user, winner), where);
    r.log.push(`  (won by u${this.user}.${winner})`);
  }
  toString() {
    return `raceJoin(u${this.user})`;
  }
}

/** The previous request again, same operationId, over the other transport: the same answer, no change. */
class Replay extends Step {
  check(m: Readonly<GroupModel>) {
    return noneDoomed(m);
  }
  async apply(_m: GroupModel, r: Real) {
    if (!r.last) return;
    const { user, inst, path, body, transport, answer } = r.last;
    const again = await r.driver.send(user, inst, path, body, transport === 'http' ? 'socket' : 'http');
    const summary = (a: Answer) => ({ status: a.status, code: a.body?.code, revision: a.body?.revision ?? a.body?.snapshot?.revision });
    expect(summary(again), `replay of ${path}\n${r.log.join('\n')}`).toEqual(summary(answer));
  }
  toString() {
    return 'replay';
  }
}

/** Waits for the ring sweep to ring out the members rung with the short window. */
export class RingOut extends Step {
  check(m: Readonly<GroupModel>) {
    return !noneDoomed(m);
  }
  async apply(m: GroupModel, r: Real) {
    await r.driver.ringOut(m.doomed().map((d) => m.userIds[d.user]!));
    r.last = undefined;
    m.ringOut();
  }
  toString() {
    return 'ringOut';
  }
}

export interface ModelSizes {
  users: number;
  installations: number;
  /** GROUP_CALL_MAX_MEMBERS: members besides the caller. */
  maxMembers: number;
}

/** The steps, weighted so that a call lives a while: invitees act most, the caller's end for all is rare. */
export function stepsArb(z: ModelSizes, tally: Tally): fc.Arbitrary<Iterable<fc.AsyncCommand<GroupModel, Real>>> {
  const userArb = fc.integer({ min: 0, max: z.users - 1 });
  const instArb = fc.integer({ min: 0, max: z.installations - 1 });
  const transportArb = fc.constantFrom<Transport>('http', 'socket');
  /** Invitees: anyone but the caller, mostly one (the cap makes larger lists full sooner). */
  const inviteesArb = fc.uniqueArray(fc.integer({ min: 1, max: z.users - 1 }), { minLength: 1, maxLength: 2 });
  /** Mostly a member of the call (by its place), now and then anyone but the caller. */
  const inviteeArb: fc.Arbitrary<Who> = fc.oneof({ weight: 4, arbitrary: fc.nat(7).map((member) => ({ member })) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: z.users - 1 }) });
  const reasonArb = fc.constantFrom('localHangup', 'localHangup', 'declined', 'busy', 'unanswered', 'failed', 'remoteEnded');
  /** One late invitation in five rings with the short window (then the ring-out comes next). */
  const shortArb = fc.nat(4).map((n) => n === 0);
  const revisionArb = fc.constantFrom<'current' | 'stale'>('current', 'stale');
  const w = <T>(weight: number, arbitrary: fc.Arbitrary<T>) => ({ weight, arbitrary });
  const t = tally;
  const step: fc.Arbitrary<Step> = fc.oneof(
    w(6, fc.tuple(inviteeArb, instArb, transportArb).map(([u, i, tr]): Step => new Join(t, u, i, tr))),
    w(1, fc.tuple(inviteeArb, instArb, transportArb, revisionArb).map(([u, i, tr, e]): Step => new Join(t, u, i, tr, e))),
    // Anyone's join, the caller's too (it rejoins after leaving).
    w(1, fc.tuple(userArb, instArb, transportArb).map(([u, i, tr]): Step => new Join(t, u, i, tr))),
    w(2, inviteeArb.map((u): Step => new RaceJoin(t, u))),
    // Moves, mostly by a member with the revision it read, to either of its installations.
    w(2, fc.tuple(inviteeArb, instArb, transportArb).map(([u, i, tr]): Step => new Move(t, u, i, tr, 'current'))),
    w(1, fc.tuple(userArb, instArb, transportArb, revisionArb).map(([u, i, tr, e]): Step => new Move(t, u, i, tr, e))),
    w(4, fc.tuple(inviteeArb, instArb, transportArb).map(([u, i, tr]): Step => new Receipt(t, u, i, tr, 'socket'))),
    w(1, fc.tuple(userArb, instArb, transportArb, fc.constantFrom<'socket' | 'apns' | 'fcm'>('socket', 'apns', 'fcm')).map(([u, i, tr, p]): Step => new Receipt(t, u, i, tr, p))),
    w(4, fc.tuple(inviteeArb, instArb, transportArb, reasonArb).map(([u, i, tr, reason]): Step => new End(t, u, i, tr, reason, false))),
    // Leaves (or declines) the plain way, so calls also end by themselves.
    w(3, fc.tuple(inviteeArb, instArb, transportArb).map(([u, i, tr]): Step => new End(t, u, i, tr, 'localHangup', false))),
    w(1, fc.tuple(userArb, instArb, transportArb, reasonArb, fc.boolean()).map(([u, i, tr, reason, forAll]): Step => new End(t, u, i, tr, reason, forAll))),
    // The caller ending it for everyone from its calling installation, the usual way.
    w(1, transportArb.map((tr): Step => new End(t, 0, 0, tr, 'localHangup', true))),
    w(2, fc.tuple(userArb, instArb, transportArb, inviteesArb, shortArb).map(([u, i, tr, who, short]): Step => new Invite(t, u, i, tr, who, short))),
    w(2, fc.tuple(transportArb, inviteesArb, shortArb).map(([tr, who, short]): Step => new Invite(t, 0, 0, tr, who, short))),
    w(1, fc.constant<Step>(new Replay(t))),
    w(3, fc.constant<Step>(new RingOut(t))),
  );
  return fc.commands([step], { maxCommands: 24, size: 'max' });
}

/** The create: its invitees (two up to the cap), and one call in six rings everyone with the short window. */
export function createArb(z: ModelSizes) {
  return fc.record({
    invitees: fc.uniqueArray(fc.integer({ min: 1, max: z.users - 1 }), { minLength: 2, maxLength: z.maxMembers }),
    short: fc.nat(5).map((n) => n === 0),
  });
}

/** A run: the driver of a call created with `invitees` (short: with the short ring window), and its clean-up. */
export type NewRun = (invitees: readonly number[], short: boolean) => Promise<{ driver: Driver; close(): Promise<void> }>;

/**
 * `runs` random interleavings: every answer and snapshot as the model says, and each
 * installation's events of the call exactly the model's, in revision order. Returns the steps taken.
 */
export async function runGroupModel(z: ModelSizes, runs: number, tally: Tally, newRun: NewRun, seed?: number): Promise<number> {
  let steps = 0;
  await fc.assert(
    fc.asyncProperty(createArb(z), stepsArb(z, tally), async ({ invitees, short }, cmds) => {
      const { driver, close } = await newRun(invitees, short);
      try {
        const model = new GroupModel(driver.userIds, z.installations, z.maxMembers, invitees, short);
        const real: Real = { driver, log: [`create([${invitees.join(',')}]${short ? ', short' : ''})`] };
        if (!short) await expectSnapshot(model, real, 'after the create');
        await fc.asyncModelRun(() => ({ model, real }), cmds);
        // A short window still open rings out now, so nothing changes while the events settle.
        if (model.doomed().length > 0) await new RingOut(tally).run(model, real);
        steps += real.log.length;
        tally.add(`call ${model.end ? `ended ${model.end.reason} by ${model.end.by}` : model.state}`);
        if (process.env.GROUP_MODEL_LOG) console.log(real.log.join(' · '));
        const got = await driver.events(model.events.map((byInst) => byInst.map((e) => e.length)));
        compareEvents(model, real, got);
      } finally {
        await close();
      }
    }),
    { numRuns: runs, seed: process.env.GROUP_MODEL_SEED ? Number(process.env.GROUP_MODEL_SEED) : seed },
  );
  return steps;
}

/** The comparable part of a received event. */
function comparable(e: Record<string, unknown>): ModelEvent {
  const out: ModelEvent = { type: e.type as ModelEvent['type'], revision: Number(e.revision) };
  if (e.type === 'call.participant') Object.assign(out, { userId: e.userId, state: e.state });
  if (e.type === 'call.ringing' || e.type === 'call.moved') out.userId = e.userId as string;
  if (e.type === 'call.ended') out.reason = e.reason as string;
  return out;
}

/** Each installation's events are the model's, in revision order, and none follows the call's last revision. */
function compareEvents(m: GroupModel, r: Real, got: Record<string, unknown>[][][]): void {
  const where = r.log.join('\n');
  for (const [u, byInst] of got.entries()) {
    for (const [i, raw] of byInst.entries()) {
      const events = raw.map(comparable);
      expect(events, `u${u}.${i}'s events after\n${where}`).toEqual(m.events[u]![i]);
      // Structural, whatever the model says: revision order, and nothing after the call's end.
      const revisions = events.map((e) => e.revision);
      expect(revisions, `u${u}.${i}: in revision order`).toEqual([...revisions].sort((a, b) => a - b));
      expect(revisions.every((v) => v <= m.revision), `u${u}.${i}: nothing after revision ${m.revision}`).toBe(true);
    }
  }
}
