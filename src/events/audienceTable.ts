import type { CallChange, ChangeKind } from '../calls/change.js';
import type { CallRecord, GroupCall, Member, PairCall } from '../calls/model.js';
import { deliveriesFor } from './audience.js';
import type { Delivery } from './delivery.js';

/**
 * docs/group-calls.md and docs/api.md "Who receives what", as the Markdown tables `npm run docs`
 * writes: each change of a call run through the audience rules themselves (deliveriesFor), and
 * every delivery described by whom it reaches. So the tables cannot say other than the code does
 * (test/unit/generated-pages.test.ts).
 *
 * A one-to-one call: Alice calls Bob, each with a phone and a tablet; Bob answers on his phone.
 *
 * The call: the caller `caller` (on `caller-phone`), the member the change is about `member`, a
 * member in the call `joined`, one still ringing `ringing` and one who declined `out`; every
 * member has a phone and a tablet, and is in the call from its phone.
 */

const T = 1_700_000_000_000;
const others: Member[] = [
  { userId: 'joined', state: 'joined', installationId: 'joined-phone', joinedAtMs: T },
  { userId: 'ringing', state: 'ringing', ringUntilMs: T + 45_000 },
  { userId: 'out', state: 'declined', endedAtMs: T },
];

interface Scenario {
  change: string;
  kind: ChangeKind;
  /** The member the change is about, as it is after the change (absent: a change of the whole call). */
  member?: Member;
  call?: Partial<GroupCall>;
  /** The states of the others (default: as above), e.g. at the create. */
  rest?: Member[];
}

const SCENARIOS: Scenario[] = [
  { change: 'the call is created', kind: 'created', call: { state: 'ringing' }, rest: [{ userId: 'ringing', state: 'invited', ringUntilMs: T + 45_000 }] },
  { change: 'a member is rung into the live call', kind: 'invited', member: { userId: 'member', state: 'invited', ringUntilMs: T + 45_000 } },
  { change: 'a member’s first ringing receipt', kind: 'ringing', member: { userId: 'member', state: 'ringing', ringingAtMs: T, ringUntilMs: T + 45_000 } },
  { change: 'a ringing member joins', kind: 'joined', member: { userId: 'member', state: 'joined', joinedFrom: 'ringing', installationId: 'member-phone', joinedAtMs: T } },
  { change: 'a member who was out joins again', kind: 'joined', member: { userId: 'member', state: 'joined', joinedFrom: 'declined', installationId: 'member-phone', joinedAtMs: T } },
  { change: 'a ringing member declines (on its phone)', kind: 'member', member: { userId: 'member', state: 'declined', byInstallationId: 'member-phone', endedAtMs: T } },
  { change: 'a ringing member rings out', kind: 'member', member: { userId: 'member', state: 'missed', endedAtMs: T } },
  { change: 'a member in the call leaves', kind: 'member', member: { userId: 'member', state: 'left', installationId: 'member-phone', leftAtMs: T } },
  { change: 'the app’s backend removes a member in the call', kind: 'member', member: { userId: 'member', state: 'left', removedFrom: 'joined', installationId: 'member-phone', leftAtMs: T } },
  { change: 'the app’s backend removes a ringing member', kind: 'member', member: { userId: 'member', state: 'left', removedFrom: 'ringing', leftAtMs: T } },
  { change: 'a member moves the call from its phone to its tablet', kind: 'moved', member: { userId: 'member', state: 'joined', installationId: 'member-tablet', movedFrom: 'member-phone', joinedAtMs: T } },
  { change: 'the caller renames the call', kind: 'renamed' },
  {
    change: 'the caller ends it for everyone (from its phone)',
    kind: 'ended',
    member: { userId: 'member', state: 'left', endedIn: 'joined', installationId: 'member-phone' },
    call: { state: 'ended', endedBy: 'caller', endReason: 'localHangup', endedByInstallationId: 'caller-phone' },
    rest: [
      { userId: 'joined', state: 'left', endedIn: 'joined', installationId: 'joined-phone' },
      { userId: 'ringing', state: 'missed', endedIn: 'ringing' },
      others[2]!,
    ],
  },
];

function recordOf(s: Scenario): GroupCall {
  const caller: Member = { userId: 'caller', state: s.call?.state === 'ended' ? 'left' : 'joined', installationId: 'caller-phone', joinedAtMs: T, ...(s.call?.state === 'ended' ? { endedIn: 'joined' as const } : {}) };
  const members = [caller, ...(s.member ? [s.member] : []), ...(s.rest ?? others)];
  return {
    callId: 'call',
    state: 'accepted',
    revision: '5',
    callerUserId: 'caller',
    callerInstallationId: 'caller-phone',
    callerDisplayName: 'Caller',
    callerHandle: 'app:caller',
    video: false,
    createdAtMs: T,
    expiresAtMs: T + 45_000,
    acceptedAtMs: T,
    ...s.call,
    kind: 'group',
    title: '',
    members,
  };
}

const WHO: Record<string, string> = { caller: 'the caller', member: 'the member', joined: 'each member in the call', ringing: 'each member ringing', out: 'each member who is out' };

/** Which of the user's installations a delivery reaches, in words. */
function installations(d: Delivery, m: Member | undefined): string {
  if (d.only) return d.only === m?.movedFrom ? 'the installation it left' : 'its installation in the call';
  if (d.except) return 'its other installations';
  return 'every installation';
}

function describe(d: Delivery, call: GroupCall): string {
  const m = call.members.find((x) => x.userId === d.userId);
  const event = `\`${d.payload.type}\`${d.payload.type === 'call.ended' ? ` \`${d.payload.reason}\`` : ''}${d.stopsRinging ? ' (and the Android signal)' : ''}`;
  return `${WHO[d.userId]}, ${installations(d, m)}: ${event}`;
}

export function groupAudienceTable(): string {
  const rows = SCENARIOS.map((s) => {
    const call = recordOf(s);
    const change: CallChange = { entryId: '1-0', shard: 0, kind: s.kind, atMs: T, call, ...(s.member ? { subjects: [s.member.userId] } : {}) };
    const told = deliveriesFor(change).map((d) => describe(d, call));
    return `| ${s.change} | ${told.length ? told.join('; ') : 'nobody'} |`;
  });
  return ['| Change | Who is told what |', '|---|---|', ...rows].join('\n');
}

interface PairScenario {
  change: string;
  kind: ChangeKind;
  call: Partial<PairCall>;
}

const ACCEPTED: Partial<PairCall> = { state: 'accepted', answeredByInstallationId: 'bob-phone', acceptedAtMs: T };
const ENDED = (endedBy: CallRecord['endedBy'], endReason: CallRecord['endReason'], byInstallation: string, accepted: boolean): Partial<PairCall> => ({
  ...(accepted ? ACCEPTED : {}),
  state: 'ended',
  endedBy,
  endReason,
  endedAtMs: T + 1,
  ...(byInstallation ? { endedByInstallationId: byInstallation } : {}),
});

const PAIR_SCENARIOS: PairScenario[] = [
  { change: 'created', kind: 'created', call: { state: 'ringing' } },
  { change: 'Bob’s first ringing receipt', kind: 'ringing', call: { state: 'ringing', ringingAtMs: T } },
  { change: 'answered (on Bob’s phone)', kind: 'answered', call: ACCEPTED },
  { change: 'Alice renamed the ringing call', kind: 'renamed', call: { state: 'ringing' } },
  { change: 'Alice renamed the accepted call', kind: 'renamed', call: ACCEPTED },
  { change: 'Alice cancelled (or failed) while it rang', kind: 'ended', call: ENDED('caller', 'localHangup', 'alice-phone', false) },
  { change: 'Bob declined on his phone (or it reported busy, or rang out)', kind: 'ended', call: ENDED('callee', 'declined', 'bob-phone', false) },
  { change: 'the ring window ended', kind: 'ended', call: ENDED('system', 'unanswered', '', false) },
  { change: 'Bob was in an accepted call (`CALL_WAITING=false`)', kind: 'ended', call: ENDED('system', 'busy', '', false) },
  { change: 'Alice hung up after the answer', kind: 'ended', call: ENDED('caller', 'localHangup', 'alice-phone', true) },
  { change: 'Bob hung up after the answer', kind: 'ended', call: ENDED('callee', 'localHangup', 'bob-phone', true) },
  { change: 'the app’s backend ended the ringing call', kind: 'ended', call: ENDED('system', 'remoteEnded', '', false) },
  { change: 'the app’s backend ended the accepted call', kind: 'ended', call: ENDED('system', 'remoteEnded', '', true) },
  { change: 'Bob moved the call from his phone to his tablet', kind: 'moved', call: { ...ACCEPTED, answeredByInstallationId: 'bob-tablet', movedFromInstallationId: 'bob-phone' } },
];

/** Which of a party's installations a one-to-one delivery reaches, in words. */
function pairInstallations(d: Delivery, call: PairCall): string {
  const named: Record<string, string> = { 'alice-phone': 'her calling installation', 'bob-phone': 'his phone', 'bob-tablet': 'his tablet' };
  if (d.only) return d.only === call.movedFromInstallationId ? `the installation he left (${named[d.only]})` : (named[d.only] ?? d.only);
  if (d.except) return `every installation but ${named[d.except] ?? d.except}`;
  return 'every installation';
}

export function pairAudienceTable(): string {
  const rows = PAIR_SCENARIOS.flatMap((s) => {
    const call: PairCall = {
      kind: 'pair', callId: 'call', revision: '3', callerUserId: 'alice', callerInstallationId: 'alice-phone', callerDisplayName: 'Alice', callerHandle: 'app:alice',
      calleeUserId: 'bob', video: false, createdAtMs: T, expiresAtMs: T + 45_000, state: 'ringing', ...s.call,
    };
    const told = deliveriesFor({ entryId: '1-0', shard: 0, kind: s.kind, atMs: T, call, ...(s.kind === 'ringing' || s.kind === 'moved' ? { subjects: ['bob'] } : {}) });
    if (told.length === 0) return [`| ${s.change} | nobody | |`];
    return told.map((d) => {
      const who = d.userId === 'alice' ? 'Alice' : 'Bob';
      const event = `\`${d.payload.type}\`${d.payload.type === 'call.ended' ? ` \`${d.payload.reason}\`` : ''}`;
      return `| ${s.change} | ${who}, ${pairInstallations(d, call)} | ${event} |`;
    });
  });
  return ['| Change | Receives | Event |', '|---|---|---|', ...rows].join('\n');
}
