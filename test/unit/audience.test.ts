import { describe, expect, it } from 'vitest';
import { deliveriesFor } from '../../src/events/audience.js';
import { isForInstallation } from '../../src/events/delivery.js';
import type { CallChange } from '../../src/calls/change.js';
import type { CallRecord, PairCall } from '../../src/calls/model.js';
import { ringingCall } from '../support/callRecords.js';

const base = ringingCall({ callId: 'c1', createdAtMs: 1000, expiresAtMs: 46_000 });
const change = (kind: CallChange['kind'], call: Partial<Omit<PairCall, 'kind'>>): CallChange => ({
  entryId: '1-0',
  shard: 0,
  kind,
  atMs: 2000,
  call: { ...base, ...call },
});
/** Who gets which (type, reason), as compact strings. */
const summary = (c: CallChange) =>
  deliveriesFor(c).map((d) => {
    const p = d.payload as { type: string; reason?: string };
    return `${d.userId}${d.only ? `=${d.only}` : ''}${d.except ? `-${d.except}` : ''}:${p.type}${p.reason ? `/${p.reason}` : ''}`;
  });

describe('audience rules (docs/api.md "Who receives what")', () => {
  it('created: every callee installation gets the invitation', () => {
    expect(summary(change('created', {}))).toEqual(['bob:call.invited']);
  });

  it('answered: caller gets call.accepted, every other callee installation answeredElsewhere', () => {
    const c = change('answered', { state: 'accepted', revision: '2', answeredByInstallationId: 'bob-tablet', acceptedAtMs: 1500 });
    expect(summary(c)).toEqual(['alice:call.accepted', 'bob-bob-tablet:call.ended/answeredElsewhere']);
  });

  it('caller cancels while ringing: every callee installation gets callerCancelled, the caller nothing', () => {
    const c = change('ended', { state: 'ended', revision: '2', endReason: 'localHangup', endedBy: 'caller', endedByInstallationId: 'alice-phone' });
    expect(summary(c)).toEqual(['bob:call.ended/callerCancelled']);
  });

  it('callee declines: the caller and the callee’s other installations get declined', () => {
    const c = change('ended', { state: 'ended', revision: '2', endReason: 'declined', endedBy: 'callee', endedByInstallationId: 'bob-phone' });
    expect(summary(c)).toEqual(['alice:call.ended/declined', 'bob-bob-phone:call.ended/declined']);
  });

  it('ring timeout: both sides get unanswered', () => {
    const c = change('ended', { state: 'ended', revision: '2', endReason: 'unanswered', endedBy: 'system' });
    expect(summary(c)).toEqual(['alice:call.ended/unanswered', 'bob:call.ended/unanswered']);
  });

  /** Bob's phone answered; then `endedBy` hangs up from `endedByInstallationId`. */
  const hangUpAfterAnswer = (endedBy: CallRecord['endedBy'], endedByInstallationId: string) =>
    change('ended', { state: 'ended', revision: '3', answeredByInstallationId: 'bob-phone', acceptedAtMs: 1500, endReason: 'localHangup', endedBy, endedByInstallationId });

  it('hang-up by the caller after answer: only the answering installation gets remoteEnded', () => {
    expect(summary(hangUpAfterAnswer('caller', 'alice-phone'))).toEqual(['bob=bob-phone:call.ended/remoteEnded']);
  });

  it('hang-up by the callee after answer: the caller gets remoteEnded', () => {
    expect(summary(hangUpAfterAnswer('callee', 'bob-phone'))).toEqual(['alice:call.ended/remoteEnded']);
  });

  it('event IDs are derived from the change, so a redelivery repeats them', () => {
    const c = change('answered', { state: 'accepted', revision: '2', answeredByInstallationId: 'bob-phone', acceptedAtMs: 1500 });
    const ids = deliveriesFor(c).map((d) => d.payload.eventId);
    expect(deliveriesFor(c).map((d) => d.payload.eventId)).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('isForInstallation honours only and except', () => {
    expect(isForInstallation(undefined, undefined, 'x')).toBe(true);
    expect(isForInstallation('x', undefined, 'x')).toBe(true);
    expect(isForInstallation('y', undefined, 'x')).toBe(false);
    expect(isForInstallation(undefined, 'x', 'x')).toBe(false);
    expect(isForInstallation(undefined, 'y', 'x')).toBe(true);
  });
});
