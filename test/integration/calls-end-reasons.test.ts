import { describe, expect, it } from 'vitest';
import { stackForFile } from '../support/stack.js';
import { acceptedCall, device, end, expectJson, getCall, ringingCall, sibling, type CallPair } from '../support/fixtures.js';
import type { ApiResponse } from '../support/http.js';

/**
 * End reasons per side (docs/protocol.md "End reasons", the
 * echo rule, src/calls/reasons.ts and lua/endCall.lua): what the ending side and the other side
 * read after each kind of end, and the ends that must change nothing.
 */

let url: string;
stackForFile({ ROLES: 'api' }, (s) => (url = s.url));

interface Row {
  from: 'ringing' | 'accepted';
  ender: 'caller' | 'callee';
  reported: string;
  enderSees: string;
  otherSees: string;
}

/** A new call in `from`, with the snapshot its last change returned and the revision an end gives it. */
async function callIn(from: Row['from']): Promise<{ pair: CallPair; last: ApiResponse; revision: string }> {
  if (from === 'ringing') {
    const pair = await ringingCall(url);
    return { pair, last: pair.created, revision: '2' };
  }
  const pair = await acceptedCall(url);
  return { pair, last: pair.answered, revision: '3' };
}

/**
 * `row.ender` ends the call with `row.reported`: the reply is `last` (the call's snapshot before)
 * ended at `revision` with the ender's reason; the ender reads the same, the other side its own reason.
 */
async function expectEndAsRow(row: Row, pair: CallPair, last: ApiResponse, revision: string): Promise<void> {
  const [ender, other] = row.ender === 'caller' ? [pair.caller, pair.callee] : [pair.callee, pair.caller];

  const res = await end(ender, pair.callId, row.reported);

  expectJson(res, 200);
  expect(res.json).toEqual({ ...last.json, revision, state: 'ended', endedAtMs: expect.any(Number), endReason: row.enderSees });
  expect((await getCall(ender, pair.callId)).text).toBe(res.text);
  expect((await getCall(other, pair.callId)).json).toEqual({ ...res.json, endReason: row.otherSees });
}

/** Each side ending the live call with `reason` gets `last` back unchanged, and the call still reads `last`. */
async function expectEndsChangeNothing(pair: CallPair, last: ApiResponse, reason: string): Promise<void> {
  for (const who of [pair.caller, pair.callee]) {
    const res = await end(who, pair.callId, reason);
    expectJson(res, 200);
    expect(res.text).toBe(last.text);
  }
  expect((await getCall(pair.caller, pair.callId)).text).toBe(last.text);
}

describe('ends of a ringing or accepted call', () => {
  const ringing: Row[] = [
    // The caller hanging up before an answer is callerCancelled for the callee, whatever its own reason.
    { from: 'ringing', ender: 'caller', reported: 'localHangup', enderSees: 'localHangup', otherSees: 'callerCancelled' },
    { from: 'ringing', ender: 'caller', reported: 'failed', enderSees: 'failed', otherSees: 'callerCancelled' },
    { from: 'ringing', ender: 'caller', reported: 'busy', enderSees: 'busy', otherSees: 'callerCancelled' },
    { from: 'ringing', ender: 'caller', reported: 'unanswered', enderSees: 'unanswered', otherSees: 'callerCancelled' },
    // The callee's decline is declined for both; its local hang-up while ringing is a decline.
    { from: 'ringing', ender: 'callee', reported: 'declined', enderSees: 'declined', otherSees: 'declined' },
    { from: 'ringing', ender: 'callee', reported: 'localHangup', enderSees: 'declined', otherSees: 'declined' },
    { from: 'ringing', ender: 'callee', reported: 'busy', enderSees: 'busy', otherSees: 'busy' },
    { from: 'ringing', ender: 'callee', reported: 'unanswered', enderSees: 'unanswered', otherSees: 'unanswered' },
    { from: 'ringing', ender: 'callee', reported: 'failed', enderSees: 'failed', otherSees: 'declined' },
  ];
  // A hang-up after the answer is remoteEnded for the other side.
  const accepted: Row[] = [
    { from: 'accepted', ender: 'caller', reported: 'localHangup', enderSees: 'localHangup', otherSees: 'remoteEnded' },
    { from: 'accepted', ender: 'callee', reported: 'localHangup', enderSees: 'localHangup', otherSees: 'remoteEnded' },
    { from: 'accepted', ender: 'caller', reported: 'failed', enderSees: 'failed', otherSees: 'remoteEnded' },
    { from: 'accepted', ender: 'callee', reported: 'failed', enderSees: 'failed', otherSees: 'remoteEnded' },
  ];

  it.each([...ringing, ...accepted])('$from: $ender reports $reported → $ender sees $enderSees, the other side sees $otherSees', async (row) => {
    const { pair, last, revision } = await callIn(row.from);
    await expectEndAsRow(row, pair, last, revision);
  });
});

describe('ends that change nothing', () => {
  it('ending an ended call returns the terminal snapshot (absorbs echoes and late ends)', async () => {
    const { callId, caller, callee } = await ringingCall(url);
    const cancelled = await end(caller, callId, 'localHangup');
    expect(cancelled.status).toBe(200);
    const calleeView = await getCall(callee, callId);
    expect(calleeView.json.endReason).toBe('callerCancelled');

    // The callee's phone echoes the cancel, then reports its own decline too late.
    for (const reason of ['callerCancelled', 'declined', 'localHangup', 'failed']) {
      const res = await end(callee, callId, reason);
      expectJson(res, 200);
      expect(res.text, reason).toBe(calleeView.text);
    }
    // The caller ending again (new operation) gets its own terminal view, unchanged.
    const again = await end(caller, callId, 'failed');
    expectJson(again, 200);
    expect(again.text).toBe(cancelled.text);
    expect((await getCall(caller, callId)).text).toBe(cancelled.text);
  });

  it.each(['remoteEnded', 'callerCancelled', 'answeredElsewhere'])('echo reason %s never changes a live call (ringing or accepted, either side)', async (reason) => {
    const ringing = await ringingCall(url);
    await expectEndsChangeNothing(ringing, ringing.created, reason);
    const accepted = await acceptedCall(url);
    await expectEndsChangeNothing(accepted, accepted.answered, reason);
  });

  it('a non-winning callee installation’s end on an accepted call changes nothing', async () => {
    const { callId, caller, callee, answered } = await acceptedCall(url);
    const otherCalleeDevice = sibling(url, callee);
    for (const reason of ['localHangup', 'declined', 'failed']) {
      const res = await end(otherCalleeDevice, callId, reason);
      expectJson(res, 200);
      expect(res.text, reason).toBe(answered.text);
    }
    expect((await getCall(caller, callId)).text).toBe(answered.text);
    // The winner can still hang up.
    const hangUp = await end(callee, callId, 'localHangup');
    expect(hangUp.json).toMatchObject({ state: 'ended', endReason: 'localHangup', revision: '3' });
  });

  it('an installation of the caller other than the calling one cannot end an accepted call', async () => {
    const { callId, caller, answered } = await acceptedCall(url);
    const callerTablet = sibling(url, caller);
    const res = await end(callerTablet, callId, 'localHangup');
    expectJson(res, 200);
    expect(res.text).toBe(answered.text);
    expect((await getCall(caller, callId)).text).toBe(answered.text);
  });
});

describe('who may end', () => {
  it('a non-member ending a call gets 404 and the call is unchanged', async () => {
    const { callId, caller, created } = await ringingCall(url);
    const stranger = device(url);
    const res = await end(stranger, callId, 'localHangup');
    expect(res.status).toBe(404);
    expect(res.json.code).toBe('not_found');
    expect((await getCall(caller, callId)).text).toBe(created.text);
  });
});
