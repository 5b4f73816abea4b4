import { describe, expect, it } from 'vitest';
import { stackForFile } from '../support/stack.js';
import { device, end, expectProblem, headCursor, rename, ringingCall } from '../support/fixtures.js';
import { readAllEvents, waitUntil } from '../e2e/helpers.js';

/**
 * One user cannot flood another's event log with renames (docs/api.md "Abuse limits"): a call may be
 * renamed RENAMES_PER_CALL times, a user RATE_RENAMES_PER_MIN times a minute; past either, 429
 * and nothing is stored. The callee's log keeps the real call's invitation.
 */

let url: string;
stackForFile({ RENAMES_PER_CALL: '3', RATE_RENAMES_PER_MIN: '5', EVENT_LOG_MAX_LEN: '10' }, (s) => (url = s.url));

describe('rename flood', () => {
  it('a call takes RENAMES_PER_CALL renames, a user RATE_RENAMES_PER_MIN a minute; the callee keeps the call in its log', async () => {
    const callee = device(url);
    const cursor = await headCursor(callee);
    const pair = await ringingCall(url, device(url), callee);
    for (let i = 1; i <= 3; i++) expect((await rename(pair.caller, pair.callId, `Name ${i}`)).status).toBe(200);
    const overCall = await rename(pair.caller, pair.callId, 'Name 4');
    expectProblem(overCall, 'rate_limited', /renamed as often as it may be/);
    expect(overCall.headers.get('retry-after')).toBe('60');
    expect((await pair.caller.api.get(`/v1/calls/${pair.callId}`)).json.caller.displayName).toBe('Name 3');

    // The same caller, another call: two more renames use up the per-user minute.
    const second = await ringingCall(url, pair.caller, device(url));
    expect((await rename(second.caller, second.callId, 'Other 1')).status).toBe(200);
    const overUser = await rename(second.caller, second.callId, 'Other 2');
    expectProblem(overUser, 'rate_limited', /too many renames by this user/);
    expect(Number(overUser.headers.get('retry-after'))).toBeGreaterThan(0);

    // The callee's log: the invitation and the three renames, nothing evicted (max length 10);
    // the cancel that follows is the barrier after which nothing else may have arrived.
    expect((await end(pair.caller, pair.callId, 'localHangup')).status).toBe(200);
    let events: Awaited<ReturnType<typeof readAllEvents>>['events'] = [];
    await waitUntil('the cancel in the callee\'s log', async () => {
      events = (await readAllEvents(callee, cursor)).events;
      return events.some((e) => e.type === 'call.ended');
    });
    expect(events.map((e) => e.type)).toEqual(['call.invited', 'call.renamed', 'call.renamed', 'call.renamed', 'call.ended']);
    expect(events[0]!.callId).toBe(pair.callId);
  });
});
