import { describe, expect, it } from 'vitest';
import { toSnapshot } from '../../src/calls/snapshot.js';
import type { CallRecord, PairCall } from '../../src/calls/model.js';
import { ringingCall } from '../support/callRecords.js';

/** src/calls/snapshot.ts: the snapshot each side reads (docs/protocol.md "Call snapshot"). */

const ringing = ringingCall({ callId: 'c-1' });

const accepted: PairCall = { ...ringing, state: 'accepted', revision: '2', answeredByInstallationId: 'bob-phone', acceptedAtMs: 1_700_000_005_000 };

describe('toSnapshot', () => {
  it('ringing: exactly the ringing fields of docs/protocol.md (plus video), in a fixed order, with no installation IDs', () => {
    const text = JSON.stringify(toSnapshot(ringing, 'caller'));
    expect(text).toBe(
      '{"schemaVersion":1,"callId":"c-1","revision":"1","state":"ringing",' +
        '"caller":{"userId":"alice","displayName":"Alice","handle":"app:alice"},' +
        '"calleeUserId":"bob","createdAtMs":1700000000000,"expiresAtMs":1700000045000,"video":false}',
    );
    expect(JSON.stringify(toSnapshot(ringing, 'callee'))).toBe(text);
    expect(text).not.toContain('alice-phone');
  });

  it('accepted: adds answeredByInstallationId and acceptedAtMs, no end fields', () => {
    const snap = toSnapshot(accepted, 'callee');
    expect(Object.keys(snap)).toEqual([
      'schemaVersion', 'callId', 'revision', 'state', 'caller', 'calleeUserId', 'createdAtMs', 'expiresAtMs', 'video',
      'answeredByInstallationId', 'acceptedAtMs',
    ]);
    expect(snap).toMatchObject({ state: 'accepted', revision: '2', answeredByInstallationId: 'bob-phone', acceptedAtMs: 1_700_000_005_000 });
  });

  it('ended: endedAtMs and the end reason as the viewing side reads it', () => {
    const cancelled: CallRecord = { ...ringing, state: 'ended', revision: '2', endedAtMs: 1_700_000_003_000, endReason: 'localHangup', endedBy: 'caller', endedByInstallationId: 'alice-phone' };
    expect(toSnapshot(cancelled, 'caller')).toMatchObject({ state: 'ended', endedAtMs: 1_700_000_003_000, endReason: 'localHangup' });
    expect(toSnapshot(cancelled, 'callee').endReason).toBe('callerCancelled');

    const hungUp: CallRecord = { ...accepted, state: 'ended', revision: '3', endedAtMs: 1_700_000_009_000, endReason: 'localHangup', endedBy: 'callee', endedByInstallationId: 'bob-phone' };
    const calleeView = toSnapshot(hungUp, 'callee');
    expect(Object.keys(calleeView).slice(-4)).toEqual(['answeredByInstallationId', 'acceptedAtMs', 'endedAtMs', 'endReason']);
    expect(calleeView.endReason).toBe('localHangup');
    expect(toSnapshot(hungUp, 'caller').endReason).toBe('remoteEnded');
  });

  it('an ended record without endedBy is read as a system end (same reason for both sides)', () => {
    const timedOut: CallRecord = { ...ringing, state: 'ended', revision: '2', endedAtMs: 1_700_000_045_000, endReason: 'unanswered' };
    expect(toSnapshot(timedOut, 'caller').endReason).toBe('unanswered');
    expect(toSnapshot(timedOut, 'callee').endReason).toBe('unanswered');
  });

  it('never shows an endReason on a call that is not ended', () => {
    const odd: CallRecord = { ...accepted, endReason: 'declined', endedBy: 'callee' };
    expect('endReason' in toSnapshot(odd, 'caller')).toBe(false);
  });

  it('is deterministic: the same record renders to the same bytes whatever its property order', () => {
    const shuffled = Object.fromEntries(Object.entries(accepted).reverse()) as unknown as CallRecord;
    expect(JSON.stringify(toSnapshot(shuffled, 'caller'))).toBe(JSON.stringify(toSnapshot(accepted, 'caller')));
  });

  it('never exposes internal fields (callerInstallationId, endedBy, endedByInstallationId)', () => {
    const ended: CallRecord = { ...accepted, state: 'ended', revision: '3', endedAtMs: 1, endReason: 'localHangup', endedBy: 'caller', endedByInstallationId: 'alice-phone' };
    const snap = toSnapshot(ended, 'callee') as unknown as Record<string, unknown>;
    for (const f of ['callerInstallationId', 'endedBy', 'endedByInstallationId']) expect(snap[f]).toBeUndefined();
    expect(JSON.stringify(snap)).not.toContain('alice-phone');
  });
});
