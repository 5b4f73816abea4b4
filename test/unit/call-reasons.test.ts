import { describe, expect, it } from 'vitest';
import { END_REASONS, REQUEST_END_REASONS, reasonForSide, type EndReason, type EndedBy, type Side } from '../../src/calls/reasons.js';

/** src/calls/reasons.ts: the end reasons of docs/protocol.md "End reasons" and how each side reads them. */

describe('END_REASONS / REQUEST_END_REASONS', () => {
  it('END_REASONS are exactly the reasons docs/protocol.md names (including busy, and movedElsewhere: "Moving a call")', () => {
    expect([...END_REASONS].sort()).toEqual(
      ['localHangup', 'declined', 'unanswered', 'remoteEnded', 'callerCancelled', 'answeredElsewhere', 'failed', 'busy', 'movedElsewhere'].sort(),
    );
  });

  it('the end endpoint accepts every reason: the phone’s own ends and the echoes it absorbs', () => {
    expect([...REQUEST_END_REASONS].sort()).toEqual([...END_REASONS].sort());
    expect(new Set(REQUEST_END_REASONS).size).toBe(REQUEST_END_REASONS.length);
  });
});

describe('reasonForSide(stored, endedBy, wasAccepted, viewer)', () => {
  const cases: [EndReason, EndedBy, boolean, Side, EndReason, string][] = [
    // The ender always reads its own reason.
    ['localHangup', 'caller', false, 'caller', 'localHangup', 'caller cancel, caller view'],
    ['failed', 'caller', false, 'caller', 'failed', 'caller failed locally, caller view'],
    ['declined', 'callee', false, 'callee', 'declined', 'callee decline, callee view'],
    ['localHangup', 'callee', true, 'callee', 'localHangup', 'callee hang-up, callee view'],
    // docs/protocol.md "End reasons": the caller hanging up before an answer is callerCancelled for the callee.
    ['localHangup', 'caller', false, 'callee', 'callerCancelled', 'caller cancel, callee view'],
    ['failed', 'caller', false, 'callee', 'callerCancelled', 'caller failed locally, callee view'],
    ['busy', 'caller', false, 'callee', 'callerCancelled', 'caller busy, callee view'],
    ['unanswered', 'caller', false, 'callee', 'callerCancelled', 'caller gave up, callee view'],
    // docs/protocol.md "End reasons": the callee's declined is declined for the caller.
    ['declined', 'callee', false, 'caller', 'declined', 'callee decline, caller view'],
    ['busy', 'callee', false, 'caller', 'busy', 'callee busy, caller view'],
    ['unanswered', 'callee', false, 'caller', 'unanswered', 'callee ring deadline, caller view'],
    ['failed', 'callee', false, 'caller', 'declined', 'callee failed before answering, caller view'],
    // After an answer, the other side reads remoteEnded whatever the ender reported.
    ['localHangup', 'caller', true, 'callee', 'remoteEnded', 'caller hang-up, callee view'],
    ['localHangup', 'callee', true, 'caller', 'remoteEnded', 'callee hang-up, caller view'],
    ['failed', 'caller', true, 'callee', 'remoteEnded', 'caller failure after answer, callee view'],
    ['declined', 'callee', true, 'caller', 'remoteEnded', 'callee "declined" after answer, caller view'],
    // System ends (ring timeout, busy) read the same on both sides.
    ['unanswered', 'system', false, 'caller', 'unanswered', 'ring timeout, caller view'],
    ['unanswered', 'system', false, 'callee', 'unanswered', 'ring timeout, callee view'],
    ['busy', 'system', false, 'caller', 'busy', 'system busy, caller view'],
    ['busy', 'system', false, 'callee', 'busy', 'system busy, callee view'],
  ];

  it.each(cases)('%s ended by %s (accepted: %s) seen by %s → %s (%s)', (stored, endedBy, accepted, viewer, expected) => {
    expect(reasonForSide(stored, endedBy, accepted, viewer)).toBe(expected);
  });

  it('the side that did not end a call never reads localHangup or an echo of its own (for every reason endCall.lua can store)', () => {
    // What lua/endCall.lua stores: echoes never end a call, and a ringing callee's localHangup is stored as declined.
    const own = ['localHangup', 'declined', 'unanswered', 'failed', 'busy'] as const;
    for (const endedBy of ['caller', 'callee'] as const) {
      for (const accepted of [false, true]) {
        const stored = own.filter((r) => !(endedBy === 'callee' && !accepted && r === 'localHangup'));
        for (const reason of stored) {
          const other: Side = endedBy === 'caller' ? 'callee' : 'caller';
          const seen = reasonForSide(reason, endedBy, accepted, other);
          expect(seen, `${reason} by ${endedBy}, accepted ${accepted}`).not.toBe('localHangup');
          expect(seen).not.toBe('answeredElsewhere');
          if (accepted) expect(seen).toBe('remoteEnded');
          if (!accepted && endedBy === 'caller') expect(seen).toBe('callerCancelled');
          expect(reasonForSide(reason, endedBy, accepted, endedBy)).toBe(reason);
        }
      }
    }
  });
});
