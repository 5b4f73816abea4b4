import { describe, expect, it } from 'vitest';
import { decide, GUARDS, MACHINE_EVENTS, RULES, type Guard, type Role } from '../../src/calls/machine.js';
import { CALL_STATES, MEMBER_STATES } from '../../src/calls/model.js';
import { participants } from '../../src/calls/participants.js';
import type { CallRecord } from '../../src/calls/model.js';
import { expandIncludes } from '../../src/redis/scripts.js';
import { ringingCall } from '../support/callRecords.js';
import { fileRedis } from '../support/fixtures.js';

/**
 * The call machine's rows are one table (src/calls/machine.ts) that the scripts read as
 * lua/includes/callMachineRules.lua. Here its Lua interpreter (lua/includes/callMachine.lua
 * `decide`) runs by EVAL, with no keys, over every situation a request can meet, and must pick
 * the same row as the TypeScript `decide` each time: the two cannot drift, and a row edited on
 * one side only (the generated include left stale) fails here or in test/unit/documents.test.ts.
 */
const db = fileRedis();

/** What a request can differ in besides the states: each flag decides one guard's inputs. */
const FLAGS = ['sameInstallation', 'staleRevision', 'echoReason', 'forAll', 'pair', 'windowPassed', 'busyElsewhere'] as const;

interface Case {
  event: string;
  role: Role;
  call: string;
  member: string;
  flags: Record<(typeof FLAGS)[number], boolean>;
}

function cases(): Case[] {
  const out: Case[] = [];
  for (const event of MACHINE_EVENTS)
    for (const role of ['caller', 'invitee'] as const)
      for (const call of CALL_STATES)
        for (const member of MEMBER_STATES)
          for (let bits = 0; bits < 1 << FLAGS.length; bits++) {
            out.push({ event, role, call, member, flags: Object.fromEntries(FLAGS.map((f, i) => [f, (bits & (1 << i)) !== 0])) as Case['flags'] });
          }
  return out;
}

/** The guards that hold for a case, as the Lua guards compute them from its request. */
function guardsOf(c: Case): Set<Guard> {
  const g = new Set<Guard>();
  if (c.flags.sameInstallation) g.add('sameInstallation');
  else g.add('otherInstallation');
  if (c.flags.staleRevision) g.add('staleRevision');
  if (c.flags.echoReason) g.add('echoReason');
  if (c.flags.forAll) g.add('forAll');
  if (c.flags.pair) g.add('pair');
  if (c.flags.windowPassed) g.add('windowPassed');
  if (c.flags.busyElsewhere) g.add('busyElsewhere');
  return g;
}

const HARNESS = `
--@include "callMachine"
local out = {}
for i, c in ipairs(cjson.decode(ARGV[1])) do
  local r = {
    event = c.event, role = c.role, pair = c.flags.pair, forAll = c.flags.forAll,
    installationId = c.flags.sameInstallation and 'inst-1' or 'inst-2',
    expectedRevision = c.flags.staleRevision and '4' or '',
    reason = c.flags.echoReason and 'remoteEnded' or 'localHangup',
    call = { values = { state = c.call, revision = '5' } },
    member = { state = c.member, installationId = 'inst-1', ringUntilMs = 1000 },
    now = c.flags.windowPassed and 1000 or 999,
    busy = c.flags.busyElsewhere,
  }
  local _, index = decide(r)
  out[i] = index
end
return out
`;

describe('the call machine', () => {
  it('its Lua interpreter picks the row the TypeScript one picks, in every situation', async () => {
    const all = cases();
    const lua = expandIncludes(HARNESS);
    const got: number[] = [];
    // In chunks: one EVAL's arguments stay small.
    for (let i = 0; i < all.length; i += 500) got.push(...((await db.redis.eval(lua, 0, JSON.stringify(all.slice(i, i + 500)))) as number[]));
    const want = all.map((c) => RULES.indexOf(decide({ event: c.event as never, role: c.role, call: c.call as never, member: c.member as never, guards: guardsOf(c) })) + 1);
    const differ = all.flatMap((c, i) => (got[i] === want[i] ? [] : [`${JSON.stringify(c)}: lua row ${got[i]}, ts row ${want[i]}`]));
    expect(differ.slice(0, 10)).toEqual([]);
    expect(got).toHaveLength(all.length);
    // Every row is reached by some situation: none is dead.
    expect(new Set(want).size).toBe(RULES.length);
  });

  it('a one-to-one call’s two members are the same in Lua (callMembers) and TypeScript (participants), in every state', async () => {
    const t = ringingCall().createdAtMs;
    const ended = (over: Partial<CallRecord>): CallRecord => ringingCall({ state: 'ended', revision: '2', endedAtMs: t + 9, ...over });
    const answered = { answeredByInstallationId: 'bob-phone', acceptedAtMs: t + 5 };
    const calls: CallRecord[] = [
      ringingCall(),
      ringingCall({ ringingAtMs: t + 1, ringingVia: 'apns' }),
      ringingCall({ state: 'accepted', revision: '2', ...answered }),
      ended({ ...answered, endReason: 'localHangup', endedBy: 'caller', endedByInstallationId: 'alice-phone' }),
      ended({ ...answered, endReason: 'failed', endedBy: 'callee', endedByInstallationId: 'bob-phone' }),
      ended({ endReason: 'declined', endedBy: 'callee', endedByInstallationId: 'bob-tablet' }),
      ended({ endReason: 'busy', endedBy: 'callee', endedByInstallationId: 'bob-tablet' }),
      ended({ endReason: 'unanswered', endedBy: 'callee', endedByInstallationId: 'bob-tablet' }),
      ended({ endReason: 'busy', endedBy: 'system' }),
      ended({ endReason: 'unanswered', endedBy: 'system' }),
      ended({ endReason: 'localHangup', endedBy: 'caller', endedByInstallationId: 'alice-phone', ringingAtMs: t + 1 }),
    ];
    const lua = expandIncludes(`
--@include "groupMembers"
local out = {}
for i, flat in ipairs(cjson.decode(ARGV[1])) do
  local call = { names = {}, values = {} }
  for j = 1, #flat, 2 do call.values[flat[j]] = flat[j + 1] end
  local members = {}
  for _, m in ipairs(callMembers(call)) do members[#members + 1] = { m.userId, m.state, m.installationId or '' } end
  out[i] = cjson.encode(members)
end
return out
`);
    const flat = (c: CallRecord) => Object.entries(c).flatMap(([k, v]) => [k, typeof v === 'boolean' ? (v ? '1' : '0') : String(v)]);
    const got = ((await db.redis.eval(lua, 0, JSON.stringify(calls.map(flat)))) as string[]).map((j) => JSON.parse(j));
    expect(got).toEqual(calls.map((c) => participants(c).map((p) => [p.userId, p.state, p.installationId ?? ''])));
    // Each callee state a one-to-one call can be in is among them.
    expect(new Set(got.map((m) => m[1][1]))).toEqual(new Set(['invited', 'ringing', 'joined', 'left', 'declined', 'busy', 'missed']));
  });

  it('names only guards both sides implement', () => {
    for (const r of RULES) for (const g of r.when ?? []) expect(Object.keys(GUARDS)).toContain(g);
  });
});
