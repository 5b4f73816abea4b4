import { describe, expect, it } from 'vitest';
import { earlyEventsFor, parseEarlyNotice } from '../../src/events/earlyNotice.js';
import { deliveriesFor } from '../../src/events/audience.js';
import { parseChange } from '../../src/calls/change.js';

/**
 * parseEarlyNotice and earlyEventsFor (docs/signaling.md "Early events"): what a gateway derives
 * from an early notice's body, the outbox entry's fields as a JSON array (lua/includes/appendOutbox.lua), must be
 * exactly the relay's events for that user (audience.ts), and anything else must be ignored.
 */

const answered = [
  'change', 'answered', 'at', '1795236718120',
  'callId', 'call-1', 'state', 'accepted', 'revision', '2',
  'callerUserId', 'alice', 'callerInstallationId', 'alice-phone', 'callerDisplayName', 'Alice', 'callerHandle', 'app:alice',
  'calleeUserId', 'bob', 'video', '0', 'createdAtMs', '1795236710000', 'expiresAtMs', '1795236755000',
  'answeredByInstallationId', 'bob-phone', 'acceptedAtMs', '1795236718120',
];

describe('early notices', () => {
  const notice = (flat: string[]) => parseEarlyNotice(JSON.stringify(flat))!;

  it('gives each party the relay’s own events of the change, byte for byte, with their narrowing', () => {
    const relay = deliveriesFor(parseChange('1-0', 0, answered));
    for (const user of ['alice', 'bob']) {
      const early = earlyEventsFor(notice(answered), user);
      expect(early).toMatchObject({ callId: 'call-1', revision: 2, ended: false });
      expect(early.events).toEqual(
        relay.filter((d) => d.userId === user).map((d) => ({ json: JSON.stringify(d.payload), only: d.only, except: d.except })),
      );
      expect(early.events).toHaveLength(1);
    }
    // The answering installation is not told its own answer.
    expect(earlyEventsFor(notice(answered), 'bob').events[0]!.except).toBe('bob-phone');
    // Both parties count every notice of the call, with events for them or not.
    expect(notice(answered).parties).toEqual(['alice', 'bob']);
  });

  it('a user who is no party gets nothing; an end is marked as the call’s last change', () => {
    expect(earlyEventsFor(notice(answered), 'carol').events).toEqual([]);
    const ended = [...answered];
    ended[1] = 'ended';
    ended[ended.indexOf('state') + 1] = 'ended';
    ended[ended.indexOf('revision') + 1] = '3';
    ended.push('endedAtMs', '1795236720000', 'endReason', 'localHangup', 'endedBy', 'caller', 'endedByInstallationId', 'alice-phone');
    expect(earlyEventsFor(notice(ended), 'bob')).toMatchObject({ revision: 3, ended: true });
  });

  it('ignores what is not an outbox entry: bad JSON, not a list of strings, no change header, a bad revision', () => {
    for (const body of ['{', '{"a":1}', '[1,2]', JSON.stringify(['message', 'call-1']), JSON.stringify(answered.map((f) => (f === '2' ? 'two' : f)))]) {
      expect(parseEarlyNotice(body), body).toBeUndefined();
    }
  });
});
