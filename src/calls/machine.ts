import { MEMBER_STATES, type CallState, type MemberState } from './model.js';

/**
 * The call machine: every rule of a party's request on a call, as data (docs/protocol.md "The
 * call machine"). A one-to-one call is a call of two members, the caller and the callee, so one
 * set of rows serves both kinds; what differs between the kinds is how a change is stored and
 * told (the projection: lua/includes/callMachine.lua applyDecision), never which change it is.
 *
 * The rows are compiled into lua/includes/callMachineRules.lua (`npm run docs`; a test fails while
 * it is stale), which lua/includes/callMachine.lua `decide` runs: it tests them as `decide` below does;
 * test/unit/call-machine.test.ts runs both over every case and the docs' tables are generated
 * from them (scripts/generate-docs.ts).
 */

/**
 * What the machine decides: a party's requests (`ring`, `answer`, `end`), a member's ring window
 * ending (`ringOut`), a member asking to ring more users into the call (`inviteMore`), then each
 * of them (`invite`: a user new to the call is decided as a member who is out), a party's in-call
 * message (`message`, docs/api.md "In-call messages"), the app's backend removing a member
 * (`remove`, docs/server-api.md "Remove a participant"), a member in the call moving it to another
 * of its installations (`move`, docs/protocol.md "Moving a call"), and what becomes of each member
 * when the call ends (`close`).
 */
export const MACHINE_EVENTS = ['ring', 'answer', 'end', 'move', 'ringOut', 'inviteMore', 'invite', 'message', 'remove', 'close'] as const;
export type MachineEvent = (typeof MACHINE_EVENTS)[number];

/** Who makes a request: the caller, or an invitee (the callee of a one-to-one call). */
export type Role = 'caller' | 'invitee';

/**
 * Conditions a row may name besides the call's and the member's state. Each is a predicate of the
 * request and the call; lua/includes/callMachine.lua implements the same names.
 */
export const GUARDS = {
  sameInstallation: 'the request comes from the member’s installation in the call',
  otherInstallation: 'the member is in the call from another installation',
  staleRevision: '`expectedRevision` is given and is not the call’s revision',
  echoReason: 'the reason is one the server tells (`remoteEnded`, `callerCancelled`, `answeredElsewhere`, `movedElsewhere`)',
  forAll: '`forAll` is true',
  pair: 'the call is a one-to-one call (two members)',
  windowPassed: 'the member’s ring window has passed (`ringUntilMs`; a one-to-one call’s `expiresAtMs`)',
  busyElsewhere: 'the member is in another accepted call (`CALL_WAITING=false`)',
} as const;
export type Guard = keyof typeof GUARDS;

/**
 * What a row does:
 *  - `code`, `status`: the request's answer (`ok` with the snapshot, or a problem);
 *  - `member`: the member's next state; `byReason`: from the reason its phone reported (`busy` →
 *    busy, `unanswered` → missed, any other → declined);
 *  - `ends`: the call ends at once, with the member's reason, side and installation;
 *  - `change`: the kind of the change appended to the call's outbox (what the parties are told);
 *    `moved`: the member stays `joined`, from the requesting installation.
 * A row without `member` or `ends` changes nothing.
 */
export interface Outcome {
  code: 'ok' | 'ringing' | 'forbidden' | 'answer_conflict' | 'revision_conflict' | 'not_in_call' | 'call_not_active' | 'not_group' | 'not_pair';
  /**
   * 400 (the request does not apply to this kind of call) and 403: refused before anything
   * changes (a binding the request made is undone).
   */
  status: 200 | 400 | 403 | 409;
  member?: MemberState | 'byReason';
  ends?: true;
  change?: 'joined' | 'member' | 'ringing' | 'invited' | 'ended' | 'moved';
}

export interface Rule {
  event: MachineEvent;
  /** The requesting member's role; absent: either. */
  who?: Role;
  /** The call's states the row applies to; absent: any. */
  call?: readonly CallState[];
  /** The requesting member's states the row applies to; absent: any. */
  member?: readonly MemberState[];
  /** Conditions that must all hold. */
  when?: readonly Guard[];
  then: Outcome;
  /** The row in words, for the docs' table. */
  says: string;
}

const RINGING: readonly MemberState[] = ['invited', 'ringing'];
const OUT: readonly MemberState[] = ['declined', 'missed', 'busy', 'left'];
const OK = { code: 'ok', status: 200 } as const;
const FORBIDDEN = { code: 'forbidden', status: 403 } as const;
const NOT_ACTIVE = { code: 'call_not_active', status: 409 } as const;

/**
 * The rows, first match wins. After a row that moves a member, the call ends by itself when it can
 * no longer hold a conversation (`isOver`): a call of two as that member's own end, a group call
 * by the system (docs/group-calls.md "When a group call ends").
 */
export const RULES: readonly Rule[] = [
  // ---- ringing receipts (docs/group-calls.md "Ringing receipts")
  { event: 'ring', who: 'caller', then: FORBIDDEN, says: 'only an invitee sends receipts' },
  { event: 'ring', member: ['invited'], then: { code: 'ringing', status: 200, member: 'ringing', change: 'ringing' }, says: 'the first receipt: the member is ringing' },
  { event: 'ring', then: OK, says: 'a later receipt changes nothing' },
  // ---- answers and joins (docs/group-calls.md "Joining")
  { event: 'answer', who: 'caller', when: ['pair'], then: FORBIDDEN, says: 'the caller of a one-to-one call does not answer it' },
  { event: 'answer', member: ['joined'], when: ['sameInstallation'], then: OK, says: 'the winning installation again: still the winner' },
  { event: 'answer', member: ['joined'], when: ['otherInstallation'], then: { code: 'answer_conflict', status: 409 }, says: 'another installation of the member won' },
  { event: 'answer', call: ['ended'], then: { code: 'answer_conflict', status: 409 }, says: 'the call has ended' },
  { event: 'answer', when: ['staleRevision'], then: { code: 'revision_conflict', status: 409 }, says: 'the call changed since the revision the device saw' },
  { event: 'answer', member: RINGING, then: { ...OK, member: 'joined', change: 'joined' }, says: 'the first installation to answer wins; the call is accepted' },
  { event: 'answer', member: OUT, then: { ...OK, member: 'joined', change: 'joined' }, says: 'a member who is out joins again while the call lives' },
  // ---- ends (docs/protocol.md "End reasons", docs/group-calls.md "Leaving, declining, cancelling")
  { event: 'end', call: ['ended'], then: OK, says: 'an ended call is returned as it is' },
  { event: 'end', when: ['echoReason'], then: OK, says: 'an echo of a reason the server told changes nothing' },
  { event: 'end', who: 'caller', call: ['ringing'], then: { ...OK, ends: true, change: 'ended' }, says: 'the caller cancels: the call ends' },
  { event: 'end', who: 'caller', member: ['joined'], when: ['sameInstallation', 'forAll'], then: { ...OK, ends: true, change: 'ended' }, says: 'the caller ends it for everyone' },
  { event: 'end', who: 'caller', member: ['joined'], when: ['sameInstallation', 'pair'], then: { ...OK, ends: true, change: 'ended' }, says: 'the caller hangs up a call of two: it ends' },
  { event: 'end', member: ['joined'], when: ['sameInstallation'], then: { ...OK, member: 'left', change: 'member' }, says: 'a member in the call leaves' },
  { event: 'end', member: RINGING, then: { ...OK, member: 'byReason', change: 'member' }, says: 'a member still ringing declines (or reports busy or rang out)' },
  { event: 'end', then: OK, says: 'anyone else (another installation, a member who is out) changes nothing' },
  // ---- moving the call to another installation of a member in it (docs/protocol.md "Moving a call")
  { event: 'move', call: ['ringing', 'ended'], then: { code: 'not_in_call', status: 409 }, says: 'only an accepted call moves' },
  { event: 'move', member: ['joined'], when: ['sameInstallation'], then: OK, says: 'already on this installation: nothing changes' },
  { event: 'move', when: ['staleRevision'], then: { code: 'revision_conflict', status: 409 }, says: 'the call changed since the revision the device saw (another installation moved first)' },
  { event: 'move', member: ['joined'], then: { ...OK, member: 'joined', change: 'moved' }, says: 'the member goes on from this installation; the one it leaves is told `movedElsewhere`' },
  { event: 'move', then: { code: 'not_in_call', status: 409 }, says: 'a member not in the call (ringing or out) has nothing to move' },
  // ---- ring windows (the ring sweeps, and every request first: lua/includes/expireIfDue.lua)
  { event: 'ringOut', member: RINGING, when: ['windowPassed'], then: { ...OK, member: 'missed', change: 'member' }, says: 'a member still ringing past its window missed the call' },
  { event: 'ringOut', then: OK, says: 'a member not ringing, or within its window, stays' },
  // ---- inviting more into a live group call (docs/group-calls.md "Inviting more"): the request, then each invitee
  { event: 'inviteMore', when: ['pair'], then: { code: 'not_group', status: 400 }, says: 'a one-to-one call takes no more members' },
  { event: 'inviteMore', call: ['ended'], then: NOT_ACTIVE, says: 'an ended call takes no more members' },
  { event: 'inviteMore', member: ['joined'], when: ['sameInstallation'], then: OK, says: 'a member in the call invites, from its installation in it' },
  { event: 'inviteMore', then: FORBIDDEN, says: 'anyone else (ringing, out, another installation) may not' },
  { event: 'invite', member: OUT, when: ['busyElsewhere'], then: { ...OK, member: 'busy', change: 'invited' }, says: 'an invitee in another accepted call is busy and not rung' },
  { event: 'invite', member: OUT, then: { ...OK, member: 'invited', change: 'invited' }, says: 'an invitee who is out (or new to the call) is rung, with a new ring window' },
  { event: 'invite', then: OK, says: 'a member ringing or in the call is left as it is' },
  // ---- in-call messages (docs/api.md "In-call messages")
  { event: 'message', call: ['ended'], then: NOT_ACTIVE, says: 'an ended call carries no messages' },
  { event: 'message', member: ['joined'], when: ['pair', 'otherInstallation'], then: FORBIDDEN, says: 'a party in the call sends from its installation in it (a callee still ringing, from any)' },
  { event: 'message', when: ['pair'], then: OK, says: 'the two parties of a one-to-one call message each other' },
  { event: 'message', then: { code: 'not_pair', status: 400 }, says: 'a group call shares its media through the SFU, not in-call messages' },
  // ---- the app's backend removes a member (docs/server-api.md "Remove a participant")
  { event: 'remove', when: ['pair'], then: { code: 'not_group', status: 400 }, says: 'a one-to-one call is ended, not left by a removal' },
  { event: 'remove', call: ['ended'], then: OK, says: 'an ended call is left as it is' },
  { event: 'remove', who: 'caller', call: ['ringing'], then: { ...OK, ends: true, change: 'ended' }, says: 'the caller removed before anyone joined: the call is cancelled, as by the caller' },
  { event: 'remove', member: ['joined', ...RINGING], then: { ...OK, member: 'left', change: 'member' }, says: 'a member in the call or still ringing is out' },
  { event: 'remove', then: OK, says: 'a member already out stays out' },
  // ---- the call ends (lua/includes/endCallNow.lua): each member's last state
  { event: 'close', member: RINGING, then: { ...OK, member: 'missed' }, says: 'a member still ringing missed the call' },
  { event: 'close', member: ['joined'], then: { ...OK, member: 'left' }, says: 'a member in the call left it' },
  { event: 'close', then: OK, says: 'a member already out stays out' },
];

/** What decide needs to know of the call and the request. */
export interface Situation {
  event: MachineEvent;
  role: 'caller' | 'invitee';
  call: CallState;
  member: MemberState;
  guards: ReadonlySet<Guard>;
}

/** The first row that matches; every event's last row matches anything. */
export function decide(s: Situation): Rule {
  for (const r of RULES) {
    if (r.event !== s.event) continue;
    if (r.who && r.who !== s.role) continue;
    if (r.call && !r.call.includes(s.call)) continue;
    if (r.member && !r.member.includes(s.member)) continue;
    if (r.when && !r.when.every((g) => s.guards.has(g))) continue;
    return r;
  }
  throw new Error(`no rule for ${s.event}`);
}

/** A member's state from the reason its phone reported when it stopped ringing (`byReason`). */
export const STATE_BY_REASON: Readonly<Record<string, MemberState>> = { busy: 'busy', unanswered: 'missed' };
export const stateByReason = (reason: string): MemberState => STATE_BY_REASON[reason] ?? 'declined';

/**
 * The rows compiled into Lua (lua/includes/callMachineRules.lua): `machineRow(r, G)` tests them in
 * order, as `decide` does, with `G` the guards (lua/includes/callMachine.lua), and returns the
 * first that holds as its place in RULES and its outcome. Compiled to plain comparisons rather
 * than kept as a table: a script would build the table again on every call.
 */
export function machineLua(): string {
  const str = (v: string) => `'${v}'`;
  const oneOf = (name: string, vs: readonly string[]) => (vs.length === 1 ? `${name} == ${str(vs[0]!)}` : `(${vs.map((v) => `${name} == ${str(v)}`).join(' or ')})`);
  const lines: string[] = [];
  for (const event of MACHINE_EVENTS) {
    lines.push(`  ${lines.length === 0 ? 'if' : 'elseif'} event == ${str(event)} then`);
    RULES.forEach((r, i) => {
      if (r.event !== event) return;
      const test = [
        ...(r.who ? [`role == ${str(r.who)}`] : []),
        ...(r.call ? [oneOf('call', r.call)] : []),
        ...(r.member ? [oneOf('member', r.member)] : []),
        ...(r.when ?? []).map((g) => `G.${g}(r)`),
      ];
      const t = r.then;
      const out = [`code = ${str(t.code)}`, `status = ${t.status}`];
      if (t.member) out.push(`member = ${str(t.member)}`);
      if (t.ends) out.push('ends = true');
      if (t.change) out.push(`change = ${str(t.change)}`);
      const ret = `return ${i + 1}, { ${out.join(', ')} }`;
      lines.push(test.length ? `    if ${test.join(' and ')} then ${ret} end` : `    ${ret}`);
    });
  }
  const byReason = Object.entries(STATE_BY_REASON).map(([k, v]) => `${k} = ${str(v)}`);
  return [
    '-- Generated from src/calls/machine.ts RULES by `npm run docs` (a test fails while it is stale).',
    `local STATE_BY_REASON = { ${byReason.join(', ')} }`,
    '',
    '-- The first row that holds for request `r` under guards `G`: its place in RULES, and its outcome.',
    'local function machineRow(r, G)',
    '  local event, role, call, member = r.event, r.role, r.call.values.state, r.member.state',
    ...lines,
    '  end',
    "  return redis.error_reply('ERR the call machine has no row for ' .. tostring(event))",
    'end',
  ].join('\n');
}

const EVENT_NAMES: Record<MachineEvent, string> = { ring: 'ringing receipt', answer: 'answer', end: 'end', move: 'move to another installation', ringOut: 'ring window ends', inviteMore: 'a member invites more', invite: 'invitation into a live call', message: 'in-call message', remove: 'removal by the app’s backend', close: 'the call ends' };

/** What a row's outcome does, in words (the docs' table). */
function outcomeWords(event: MachineEvent, t: Outcome): string {
  // The kind refusals answer the generic problem code on the wire, with a detail per request.
  if (t.status === 400) return `\`400 invalid_request\` (${t.code === 'not_group' ? 'not a group call' : 'not a one-to-one call'}), nothing changes`;
  if (t.status !== 200) return `\`${t.status} ${t.code}\`, nothing changes`;
  if (event === 'inviteMore') return 'each invitee is decided (the next rows)';
  if (event === 'message') return 'the message is sent; the call does not change';
  if (t.ends) return 'the call ends';
  if (t.member === 'byReason') return 'the member is `declined` (`busy`, `missed` when its phone said `busy`, `unanswered`)';
  if (t.change === 'moved') return 'the member is `joined` from the requesting installation';
  if (t.member) return `the member is \`${t.member}\`${t.member === 'joined' ? ' (the call is `accepted`)' : ''}`;
  return 'nothing changes';
}

/**
 * The rows as the Markdown table of docs/protocol.md "The call machine" (generated by
 * `npm run docs`; a test fails while the page is stale).
 */
export function machineTable(): string {
  const list = (vs: readonly string[] | undefined) => (vs ? vs.map((v) => `\`${v}\``).join(', ') : 'any');
  const rows = RULES.map(
    (r) => `| ${EVENT_NAMES[r.event]} | ${r.who ?? 'any'} | ${list(r.call)} | ${list(r.member)} | ${r.when ? r.when.map((g) => GUARDS[g]).join('; ') : ''} | ${outcomeWords(r.event, r.then)} | ${r.says} |`,
  );
  return ['| Request | By | Call | Member | When | Then | In words |', '|---|---|---|---|---|---|---|', ...rows].join('\n');
}

/** What each member state means (docs/protocol.md "Group call members"). */
const MEMBER_STATE_MEANINGS: Record<MemberState, string> = {
  invited: 'rung, no receipt yet',
  ringing: 'one of its installations sent a [ringing receipt](group-calls.md#ringing-receipts)',
  joined: 'in the call, from one installation (the caller from the start)',
  declined: 'one of its installations declined',
  missed: 'its ring window ran out, or the call ended while it rang',
  busy: 'in another accepted call when rung (`CALL_WAITING=false`)',
  left: 'was in the call and left it, was removed, or the call ended',
};

/**
 * The member states with the states each can move to and on what (docs/protocol.md "Group call
 * members", generated by `npm run docs`): read off the rows, so it cannot say otherwise.
 */
export function memberStatesTable(): string {
  const rows = MEMBER_STATES.map((state) => {
    const next = new Map<MemberState, Set<string>>();
    for (const r of RULES) {
      const to = r.then.member;
      if (!to || !r.member?.includes(state)) continue;
      for (const target of to === 'byReason' ? (['declined', 'busy', 'missed'] as const) : [to]) {
        if (!next.has(target)) next.set(target, new Set());
        next.get(target)!.add(EVENT_NAMES[r.event]);
      }
    }
    const cell = [...next].map(([target, on]) => `\`${target}\` (${[...on].join(', ')})`).join(', ');
    return `| \`${state}\` | ${MEMBER_STATE_MEANINGS[state]} | ${cell} |`;
  });
  return ['| State | Meaning | Next (on) |', '|---|---|---|', ...rows].join('\n');
}
