import { describe, expect, it } from 'vitest';
import { deliveriesFor } from '../../src/events/audience.js';
import { missedBy } from '../../src/calls/missed.js';
import { missedEndIn } from '../../src/push/missedCallSeen.js';
import type { CallChange } from '../../src/calls/change.js';
import type { PairCall } from '../../src/calls/model.js';
import { ringingCall } from '../support/callRecords.js';

/**
 * Which `call.ended` a gateway marks seen (src/push/missedCallSeen.ts missedEndIn, docs/protocol.md
 * "Missed-call alerts"): over every one-to-one ending the audience rules tell, exactly the ends
 * that reach the user who missed the call (src/calls/missed.ts), and never an answered call's.
 */

const base = ringingCall({ callId: 'c1', createdAtMs: 1000, expiresAtMs: 46_000 });
const ended = (call: Partial<Omit<PairCall, 'kind'>>): CallChange => ({ entryId: '1-0', shard: 0, kind: 'ended', atMs: 2000, call: { ...base, state: 'ended', ...call } });
const answered = { answeredByInstallationId: 'bob-phone', acceptedAtMs: 1500, revision: '3' };

const ENDINGS: Record<string, CallChange> = {
  'caller cancels': ended({ revision: '2', endReason: 'localHangup', endedBy: 'caller', endedByInstallationId: 'alice-phone' }),
  "caller's start failed": ended({ revision: '2', endReason: 'failed', endedBy: 'caller', endedByInstallationId: 'alice-phone' }),
  'ring timeout': ended({ revision: '2', endReason: 'unanswered', endedBy: 'system' }),
  'server API, ringing, remoteEnded': ended({ revision: '2', endReason: 'remoteEnded', endedBy: 'system' }),
  'server API, ringing, failed': ended({ revision: '2', endReason: 'failed', endedBy: 'system' }),
  'callee declines': ended({ revision: '2', endReason: 'declined', endedBy: 'callee', endedByInstallationId: 'bob-phone' }),
  'callee busy': ended({ revision: '2', endReason: 'busy', endedBy: 'callee', endedByInstallationId: 'bob-phone' }),
  'caller hangs up after the answer': ended({ ...answered, endReason: 'localHangup', endedBy: 'caller', endedByInstallationId: 'alice-phone' }),
  'callee hangs up after the answer': ended({ ...answered, endReason: 'localHangup', endedBy: 'callee', endedByInstallationId: 'bob-phone' }),
  'server API after the answer': ended({ ...answered, endReason: 'remoteEnded', endedBy: 'system' }),
};

describe('ends marked seen on a socket', () => {
  for (const [name, change] of Object.entries(ENDINGS)) {
    it(`${name}: marked for exactly the users who missed the call`, () => {
      const marked = deliveriesFor(change).flatMap((d) => {
        const end = missedEndIn(JSON.stringify(d.payload), d.only);
        if (end) expect(end).toEqual({ callId: 'c1', revision: change.call.revision });
        return end ? [d.userId] : [];
      });
      expect(marked).toEqual(missedBy(change).map((p) => p.userId));
    });
  }

  it('the rule holds some of each: a cancel and a ring timeout are marked, an answered call never', () => {
    const markedIn = (c: CallChange) => deliveriesFor(c).some((d) => missedEndIn(JSON.stringify(d.payload), d.only));
    expect(markedIn(ENDINGS['caller cancels']!)).toBe(true);
    expect(markedIn(ENDINGS['ring timeout']!)).toBe(true);
    expect(markedIn(ENDINGS['server API, ringing, remoteEnded']!)).toBe(true);
    for (const k of ['caller hangs up after the answer', 'callee hangs up after the answer', 'server API after the answer', 'callee declines']) expect(markedIn(ENDINGS[k]!), k).toBe(false);
  });

  it('passes over every other event, and text that is no JSON', () => {
    expect(missedEndIn('{"type":"call.invited","callId":"c1","revision":"1"}', '')).toBeUndefined();
    expect(missedEndIn('{"type":"call.ended","reason":"unanswered"', '')).toBeUndefined();
    expect(missedEndIn('{"eventId":"c1:2:ended-callee","type":"call.ended","callId":"c1","revision":"2","reason":"unanswered"}', 'bob-phone')).toBeUndefined();
    expect(missedEndIn('{"eventId":"c1:2:ended-callee","type":"call.ended","callId":"c1","revision":"2","reason":"unanswered"}', undefined)).toEqual({ callId: 'c1', revision: '2' });
  });
});
