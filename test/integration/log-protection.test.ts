import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { stackForFile, type Stack } from '../support/stack.js';
import { device, end, expectProblem, headCursor, rename, ringingCall, uid, type Device } from '../support/fixtures.js';
import { readAllEvents, waitUntil } from '../e2e/helpers.js';

/**
 * What other users can write into one user's event log is bounded (docs/api.md "Abuse limits"): the
 * callee's invitations per minute from all callers together (RATE_INVITES_PER_CALLEE_PER_MIN),
 * and per call its invitation, its end and at most RENAMES_PER_CALL renames. So a log of
 * EVENT_LOG_MAX_LEN entries keeps a device's events through a flood from any number of callers:
 * here the log is sized to exactly the bound of two rate windows (a burst may straddle a window
 * boundary), and a flood from twenty callers, each trying to call and rename as often as it
 * can, leaves the real call's invitation in the log and a cursor from before it without a gap.
 */

const INVITES = 3;
const RENAMES = 2;
/** Peer-written entries per call: invitation + end + renames. */
const PER_CALL = 2 + RENAMES;
/** Two windows' worth of calls (the real one among them), each writing all it can. */
const LOG_LEN = 2 * INVITES * PER_CALL;

let stack: Stack;
let url: string;
stackForFile({ RATE_INVITES_PER_CALLEE_PER_MIN: String(INVITES), RENAMES_PER_CALL: String(RENAMES), EVENT_LOG_MAX_LEN: String(LOG_LEN) }, (s) => {
  stack = s;
  url = s.url;
});

describe('a callee flooded by many callers', () => {
  it('gets at most RATE_INVITES_PER_CALLEE_PER_MIN invitations a minute (429, nothing stored) and keeps its real call in the log', async () => {
    const victim = device(url);
    const cursor = await headCursor(victim);
    const real = await ringingCall(url, device(url), victim);

    const attackers: Device[] = Array.from({ length: 20 }, () => device(url));
    let admitted = 0;
    for (const attacker of attackers) {
      const callId = randomUUID();
      const res = await attacker.api.post('/v1/calls', { callId, calleeUserId: victim.userId, operationId: uid('op') });
      if (res.status === 429) {
        expectProblem(res, 'rate_limited', /this callee is receiving too many calls/);
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
        // Nothing stored: the call does not exist.
        expect((await attacker.api.get(`/v1/calls/${callId}`)).status).toBe(404);
        continue;
      }
      expect(res.status, res.text).toBe(201);
      admitted++;
      // Each admitted call renames as often as it may, then is cancelled: every entry a caller
      // can put into the victim's log.
      for (let i = 0; i < RENAMES + 3; i++) {
        const renamed = await rename(attacker, callId, `Spam ${i}`);
        expect(renamed.status, renamed.text).toBe(i < RENAMES ? 200 : 429);
      }
      expect((await end(attacker, callId, 'localHangup')).status).toBe(200);
    }
    // The cap held (twice the limit at most, when the flood straddles a window boundary), and the
    // real caller's own call is untouched by the refusals.
    // (The real call counts too: the cap is on all callers together.)
    expect(admitted + 1).toBeGreaterThanOrEqual(INVITES);
    expect(admitted + 1).toBeLessThanOrEqual(2 * INVITES);

    // The victim resumes from its cursor of before the real call: no gap, the real invitation first.
    let events: Awaited<ReturnType<typeof readAllEvents>>['events'] = [];
    await waitUntil('the flood relayed', async () => {
      events = (await readAllEvents(victim, cursor)).events;
      return events.length === 1 + admitted * PER_CALL;
    });
    expect(events[0]).toMatchObject({ type: 'call.invited', callId: real.callId });
    expect(events.length).toBeLessThanOrEqual(LOG_LEN);
  });

  it('with the per-callee cap off, the same flood pushes the real call out of a log of that size', async () => {
    const open = await stack.addServer({ RATE_INVITES_PER_CALLEE_PER_MIN: '0', RENAMES_PER_CALL: String(RENAMES), EVENT_LOG_MAX_LEN: String(LOG_LEN) });
    const victim = device(open.url);
    const cursor = await headCursor(victim);
    await ringingCall(open.url, device(open.url), victim);
    for (let i = 0; i < 20; i++) {
      const attacker = device(open.url);
      const callId = randomUUID();
      expect((await attacker.api.post('/v1/calls', { callId, calleeUserId: victim.userId, operationId: uid('op') })).status).toBe(201);
      expect((await end(attacker, callId, 'localHangup')).status).toBe(200);
    }
    let page: Record<string, unknown> = {};
    await waitUntil('the real invitation trimmed away', async () => {
      page = (await victim.api.get(`/v1/call-events?cursor=${encodeURIComponent(cursor)}`)).json as Record<string, unknown>;
      return (page.gap as { reason?: string } | undefined)?.reason === 'trimmed';
    }).catch(() => {});
    expect(page).toMatchObject({ gap: { reason: 'trimmed' } });
  });
});
