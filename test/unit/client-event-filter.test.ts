import { describe, expect, it } from 'vitest';
import { EventFilter, type EventPayload } from '@calling-backend/client';

/**
 * The client package's EventFilter (docs/protocol.md "Ordering and delivery"): an eventId is
 * delivered once, and per call an event whose revision is below the last delivered one is stale
 * and dropped; other calls are independent; the memory is bounded.
 */

function ended(callId: string, revision: string, tag = 'remote'): EventPayload {
  return { schemaVersion: 1, eventId: `${callId}:${revision}:${tag}`, type: 'call.ended', callId, revision, occurredAtMs: 1, reason: 'remoteEnded' };
}
function invited(callId: string, revision = '1'): EventPayload {
  return {
    schemaVersion: 1,
    eventId: `${callId}:${revision}:invited`,
    type: 'call.invited',
    callId,
    revision,
    displayName: 'A',
    handle: 'app:a',
    issuedAtMs: 1,
    expiresAtMs: 2,
    video: false,
  };
}

describe('EventFilter', () => {
  it('delivers an eventId once', () => {
    const f = new EventFilter();
    expect(f.accept(invited('c1'))).toBe(true);
    expect(f.accept(invited('c1'))).toBe(false);
  });

  it('drops an event older than the last one delivered for its call, not for other calls', () => {
    const f = new EventFilter();
    expect(f.accept(ended('c1', '3'))).toBe(true);
    expect(f.accept(invited('c1', '1'))).toBe(false); // stale: the call already ended at 3
    expect(f.accept(invited('c2', '1'))).toBe(true);
    expect(f.accept(ended('c1', '3', 'other'))).toBe(true); // same revision, another event
    expect(f.accept(ended('c1', '10'))).toBe(true); // compared as numbers, not text
    expect(f.accept(ended('c1', '9'))).toBe(false);
  });

  it('remembers at most `window` eventIds and calls', () => {
    const f = new EventFilter(2);
    expect(f.accept(invited('a'))).toBe(true);
    expect(f.accept(invited('b'))).toBe(true);
    expect(f.accept(invited('c'))).toBe(true);
    // `a` was forgotten: its repeat passes again; `c` is still remembered.
    expect(f.accept(invited('a'))).toBe(true);
    expect(f.accept(invited('c'))).toBe(false);
  });
});
