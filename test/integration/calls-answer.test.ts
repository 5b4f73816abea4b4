import { describe, expect, it } from 'vitest';
import { stackForFile } from '../support/stack.js';
import { acceptedCall, answer, device, end, expectJson, expectProblem, getCall, ringingCall, sibling } from '../support/fixtures.js';

/**
 * Answer arbitration (docs/api.md "Answer", docs/protocol.md "States and transitions"): the winner is chosen
 * atomically while the call rings; everyone else gets 409 answer_conflict with the winner's
 * snapshot. Also `expectedRevision` and who may answer.
 */

let url: string;
stackForFile({ ROLES: 'api' }, (s) => (url = s.url));

describe('answer arbitration', () => {
  it('20 installations answering the same call at once → exactly one 200 and 19 × 409 answer_conflict, all naming the same winner', async () => {
    const { callId, caller, callee, created } = await ringingCall(url);
    const installations = [callee, ...Array.from({ length: 19 }, () => sibling(url, callee))];

    const results = await Promise.all(installations.map((d) => answer(d, callId)));

    const winners = results.filter((r) => r.status === 200);
    const losers = results.filter((r) => r.status === 409);
    expect(winners).toHaveLength(1);
    expect(losers).toHaveLength(19);
    const won = winners[0]!;
    expectJson(won, 200);
    const winnerId = won.json.answeredByInstallationId as string;
    const winnerIndex = results.indexOf(won);
    expect(winnerId).toBe(installations[winnerIndex]!.installationId);
    expect(won.json).toEqual({
      ...created.json,
      revision: '2',
      state: 'accepted',
      answeredByInstallationId: winnerId,
      acceptedAtMs: expect.any(Number),
    });
    for (const lost of losers) {
      expectProblem(lost, 'answer_conflict', 'the call was answered by another installation', ['snapshot']);
      // The loser gets the winner's snapshot, byte for byte.
      expect(JSON.stringify(lost.json.snapshot)).toBe(won.text);
      expect(lost.json.snapshot.answeredByInstallationId).toBe(winnerId);
    }
    // Exactly one change happened.
    expect((await getCall(caller, callId)).text).toBe(won.text);
  });

  it('the winning installation answering again (new operationId) still gets 200 with the same snapshot', async () => {
    const { callId, callee, answered } = await acceptedCall(url);
    const again = await answer(callee, callId);
    expectJson(again, 200);
    expect(again.text).toBe(answered.text);
  });

  it('the caller cannot answer its own call (403) and the call keeps ringing', async () => {
    const { callId, caller, created } = await ringingCall(url);
    const res = await answer(caller, callId);
    expectProblem(res, 'forbidden', 'only the callee can answer a call');
    // Not even from another of the caller's installations.
    const tablet = sibling(url, caller);
    expectProblem(await answer(tablet, callId), 'forbidden', 'only the callee can answer a call');
    expect((await getCall(caller, callId)).text).toBe(created.text);
  });

  it('a non-member answering gets 404 (the call is not revealed) and the call keeps ringing', async () => {
    const { callId, caller, created } = await ringingCall(url);
    expectProblem(await answer(device(url), callId), 'not_found', 'call not found');
    expect((await getCall(caller, callId)).text).toBe(created.text);
  });
});

describe('expectedRevision', () => {
  it('expectedRevision mismatch → 409 revision_conflict with the current snapshot; the call is unchanged', async () => {
    const { callId, caller, callee, created } = await ringingCall(url);
    for (const expectedRevision of ['2', '7', '100']) {
      const res = await answer(callee, callId, { expectedRevision });
      expectProblem(res, 'revision_conflict', "expectedRevision does not match the call's revision 1", ['snapshot']);
      expect(JSON.stringify(res.json.snapshot)).toBe(created.text);
    }
    expect((await getCall(caller, callId)).text).toBe(created.text);
    // The matching revision wins.
    const ok = await answer(callee, callId, { expectedRevision: '1' });
    expectJson(ok, 200);
    expect(ok.json).toMatchObject({ state: 'accepted', revision: '2', answeredByInstallationId: callee.installationId });
  });

  it('a call that is no longer ringing is an answer_conflict whatever expectedRevision says', async () => {
    const { callId, callee, answered } = await acceptedCall(url);
    const other = sibling(url, callee);
    for (const expectedRevision of ['1', '2', '3']) {
      const res = await answer(other, callId, { expectedRevision });
      expectProblem(res, 'answer_conflict', 'the call was answered by another installation', ['snapshot']);
      expect(JSON.stringify(res.json.snapshot)).toBe(answered.text);
    }
  });
});

describe('races between answer and end', () => {
  it('an answer racing the caller’s cancel: either the answer wins and the cancel hangs up, or the cancel wins and the answer gets 409', async () => {
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        const { callId, caller, callee } = await ringingCall(url);
        const [answered, cancelled] = await Promise.all([answer(callee, callId), end(caller, callId, 'localHangup')]);
        const final = await getCall(callee, callId);
        expect(final.json.state).toBe('ended');
        if (answered.status === 200) {
          expect(answered.json.revision).toBe('2');
          expect(cancelled.json).toMatchObject({ state: 'ended', revision: '3', endReason: 'localHangup', answeredByInstallationId: callee.installationId });
          expect(final.json.endReason).toBe('remoteEnded');
        } else {
          expectProblem(answered, 'answer_conflict', 'the call is ended and can no longer be answered', ['snapshot']);
          expect(cancelled.json).toMatchObject({ state: 'ended', revision: '2', endReason: 'localHangup' });
          expect(cancelled.json.answeredByInstallationId).toBeUndefined();
          expect(answered.json.snapshot).toEqual(final.json);
          expect(final.json.endReason).toBe('callerCancelled');
        }
      }),
    );
  });

  it('both parties hanging up at once: one end wins, the other reads the terminal snapshot', async () => {
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        const { callId, caller, callee } = await acceptedCall(url);
        const [byCaller, byCallee] = await Promise.all([end(caller, callId, 'localHangup'), end(callee, callId, 'localHangup')]);
        expect(byCaller.json.revision).toBe('3');
        expect(byCallee.json.revision).toBe('3');
        expect(byCaller.json.endedAtMs).toBe(byCallee.json.endedAtMs);
        // Exactly one of them ended the call; the other is told remoteEnded.
        expect([byCaller.json.endReason, byCallee.json.endReason].sort()).toEqual(['localHangup', 'remoteEnded']);
      }),
    );
  });
});
