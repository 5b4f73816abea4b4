import type { CallChange, ChangeKind } from '../calls/change.js';
import type { CallRecord, Member } from '../calls/model.js';
import { deliveriesFor } from './audience.js';
import type { Delivery } from './delivery.js';

/**
 * docs/group-calls.md "Who receives what", as the Markdown table `npm run docs` writes: each
 * change of a group call run through the audience rules themselves (deliveriesFor) on a call
 * with a member in every kind of place, and every delivery described by whom it reaches. So the
 * table cannot say other than the code does (test/unit/generated-pages.test.ts).
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
  call?: Partial<CallRecord>;
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

function recordOf(s: Scenario): CallRecord {
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
    calleeUserId: '',
    video: false,
    createdAtMs: T,
    expiresAtMs: T + 45_000,
    acceptedAtMs: T,
    ...s.call,
    group: { title: '', members },
  };
}

const WHO: Record<string, string> = { caller: 'the caller', member: 'the member', joined: 'each member in the call', ringing: 'each member ringing', out: 'each member who is out' };

/** Which of the user's installations a delivery reaches, in words. */
function installations(d: Delivery, m: Member | undefined): string {
  if (d.only) return d.only === m?.movedFrom ? 'the installation it left' : 'its installation in the call';
  if (d.except) return 'its other installations';
  return 'every installation';
}

function describe(d: Delivery, call: CallRecord): string {
  const m = call.group!.members.find((x) => x.userId === d.userId);
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
