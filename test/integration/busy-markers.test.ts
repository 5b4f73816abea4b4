import { describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { relayBed } from '../support/relayBed.js';
import { keys } from '../../src/redis/keys.js';
import { memberOf } from '../../src/calls/model.js';
import { createInput, uid } from '../support/fixtures.js';

/**
 * A busy marker (src/calls/activeCalls.ts) is kept by the relay a moment behind the calls, up to
 * its gathering pause and more under load (docs/architecture.md "Relays"), so the store counts it
 * only while its user is still in the call it names. No relay runs here: each marker is written as
 * the relay writes it and stays, as it does in the moment before the relay catches up.
 */
const ks = { prefix: 'bm', shards: 8 };
const bed = relayBed(ks);

/** The relay's marker: `userId` is in `callId`. */
const mark = (userId: string, callId: string) => bed.redis.hset(keys.eventLogMeta(ks, userId), 'active', callId);
const op = () => ({ operationId: uid('op'), fingerprint: uid('fp') });

/** A group call from `caller` to `members`, every member joined from `<member>-phone`. */
async function joinedGroupCall(caller: string, members: string[]): Promise<string> {
  const callId = randomUUID();
  const created = await bed.calls.createGroup({ ...createInput(caller, '', callId), inviteeUserIds: members, title: '', ...op() });
  expect(created).toMatchObject({ kind: 'outcome', status: 201 });
  for (const m of members) {
    const joined = await bed.calls.answer({ callId, userId: m, installationId: `${m}-phone`, expectedRevision: undefined, ...op() });
    expect(joined).toMatchObject({ kind: 'outcome', code: 'ok' });
    await mark(m, callId);
  }
  return callId;
}

const leave = (callId: string, userId: string) => bed.calls.end({ callId, userId, installationId: `${userId}-phone`, reason: 'localHangup', ...op() });

describe('busy markers', () => {
  it('a member who left a group call that goes on is invited back at once, not busy, though the marker still names the call', async () => {
    const [caller, stays, leaves] = [uid('caller'), uid('stays'), uid('leaves')];
    const callId = await joinedGroupCall(caller, [stays, leaves]);
    expect(await leave(callId, leaves)).toMatchObject({ kind: 'outcome', call: { state: 'accepted' } });

    const again = await bed.calls.invite({ callId, userId: caller, installationId: `${caller}-phone`, inviteeUserIds: [leaves], ...op() });
    expect(again).toMatchObject({ kind: 'outcome', code: 'ok' });
    if (again.kind !== 'outcome') throw new Error('no outcome');
    expect(memberOf(again.call, leaves)?.state).toBe('invited');
  });

  it('so is a one-to-one call to them; a member still in the call is busy', async () => {
    const [caller, stays, leaves] = [uid('caller'), uid('stays'), uid('leaves')];
    const callId = await joinedGroupCall(caller, [stays, leaves]);
    await leave(callId, leaves);

    const toLeaver = await bed.calls.create({ ...createInput(uid('other'), leaves), ...op() });
    expect(toLeaver).toMatchObject({ kind: 'outcome', call: { state: 'ringing' } });
    const toStayer = await bed.calls.create({ ...createInput(uid('other'), stays), ...op() });
    expect(toStayer).toMatchObject({ kind: 'outcome', call: { state: 'ended', endReason: 'busy' } });
  });
});
