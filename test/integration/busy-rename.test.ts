import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { startStack, type Stack } from '../support/stack.js';
import { keys } from '../../src/redis/keys.js';
import { waitUntil } from '../support/wait.js';
import { acceptedCall, DEFAULT_CALL_SHARDS, device, end, eventsUntil, expectProblem, headCursor, relayDone, rename, ringingCall, sameShardCallId, sibling, uid, type CallPair, type Device } from '../support/fixtures.js';

/** Issue 5: busy (no call waiting by default), call waiting when allowed, and rename. */

let stack: Stack;
let waitingUrl: string;

beforeAll(async () => {
  stack = await startStack();
  waitingUrl = (await stack.addServer({ CALL_WAITING: 'true', REDIS_PREFIX: 'cw' })).url;
});
afterAll(() => stack?.stop());

/**
 * A second installation of the call's callee, and both callee installations' head cursors once
 * the relay is done with the call's changes so far: the events of the create (and answer) are then
 * behind them, and the next event is the one under test.
 */
async function calleeTabletAfterRelay(pair: CallPair): Promise<{ tablet: Device; c1: string; c2: string }> {
  const tablet = sibling(stack.url, pair.callee);
  await relayDone(stack.redis, { prefix: 'cb', shards: DEFAULT_CALL_SHARDS }, [pair.callId]);
  const [c1, c2] = await Promise.all([headCursor(pair.callee), headCursor(tablet)]);
  return { tablet, c1, c2 };
}

/** The relay marks a user busy asynchronously after an answer (src/calls/activeCalls.ts): the marker is there. */
const busy = (prefix: string, userId: string) => async () => (await stack.redis.hget(keys.eventLogMeta({ prefix, shards: 8 }, userId), 'active')) !== null;

describe('busy', () => {
  it('a call to a callee in an accepted call ends at once as busy, rings nothing, and only the caller is told', async () => {
    const url = stack.url;
    const busyCall = await acceptedCall(url);
    await waitUntil('the busy marker', busy('cb', busyCall.callee.userId), 2000);

    const caller = device(url);
    const callee = busyCall.callee;
    const calleeTablet = sibling(url, callee);
    const calleeCursor = await headCursor(calleeTablet);
    const callerCursor = await headCursor(caller);

    const callId = randomUUID();
    const res = await caller.api.post('/v1/calls', { callId, calleeUserId: callee.userId, operationId: uid('op') });
    expect(res.status).toBe(201);
    expect(res.json).toMatchObject({ callId, state: 'ended', endReason: 'busy', revision: '2' });

    const callerEvents = await eventsUntil(caller, callerCursor, (e) => e.length >= 1);
    expect(callerEvents).toEqual([expect.objectContaining({ type: 'call.ended', callId, reason: 'busy' })]);
    // Barrier: once the busy call is over, a call from the same outbox shard rings the tablet; the
    // shard is relayed in order (docs/architecture.md "Relays"), so the busy call's change was relayed before it.
    expect((await end(busyCall.caller, busyCall.callId, 'localHangup')).status).toBe(200);
    const barrier = sameShardCallId(callId);
    const rang = await caller.api.post('/v1/calls', { callId: barrier, calleeUserId: callee.userId, operationId: uid('op') });
    expect(rang.status, rang.text).toBe(201);
    expect(rang.json.state).toBe('ringing');
    const calleeEvents = await eventsUntil(calleeTablet, calleeCursor, (e) => e.some((x) => x.callId === barrier));
    expect(calleeEvents.filter((e) => e.callId === callId)).toEqual([]);
    // No ring timer for a call that never rang: it is not in its shard's ring index.
    expect(await stack.redis.zscore(keys.ringingForCall({ prefix: 'cb', shards: 8 }, callId), callId)).toBeNull();
  });

  it('right after the busy call ends, the user can be called again (the marker lags; the call state decides)', async () => {
    const url = stack.url;
    const first = await acceptedCall(url);
    await waitUntil('the busy marker', busy('cb', first.callee.userId), 2000);
    expect((await end(first.caller, first.callId, 'localHangup')).status).toBe(200);
    // No waiting for the relay to clear the marker.
    const again = await ringingCall(url, device(url), first.callee);
    expect(again.created.json.state).toBe('ringing');
  });

  it('with CALL_WAITING=true the second call rings', async () => {
    const busyCall = await acceptedCall(waitingUrl);
    await waitUntil('the busy marker', busy('cw', busyCall.callee.userId), 2000);
    const second = await ringingCall(waitingUrl, device(waitingUrl), busyCall.callee);
    expect(second.created.json.state).toBe('ringing');
    // A ringing call does get its timer (the index entry the busy test checks is absent).
    expect(await stack.redis.zscore(keys.ringingForCall({ prefix: 'cw', shards: 8 }, second.callId), second.callId)).toBe(String(second.created.json.expiresAtMs));
  });
});

describe('rename', () => {
  it('the caller renames a ringing call; every callee device gets call.renamed and the snapshot changes', async () => {
    const pair = await ringingCall(stack.url);
    const { tablet, c1, c2 } = await calleeTabletAfterRelay(pair);
    const res = await rename(pair.caller, pair.callId, 'Alice (work)');
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ revision: '2', caller: { displayName: 'Alice (work)' } });
    for (const [d, c] of [[pair.callee, c1], [tablet, c2]] as const) {
      const events = await eventsUntil(d, c, (e) => e.length >= 1);
      expect(events).toEqual([
        {
          schemaVersion: 1,
          eventId: `${pair.callId}:2:renamed`,
          type: 'call.renamed',
          callId: pair.callId,
          revision: '2',
          occurredAtMs: expect.any(Number),
          displayName: 'Alice (work)',
        },
      ]);
    }
  });

  it('the new name is cut to 256 UTF-8 bytes at a character boundary', async () => {
    const pair = await ringingCall(stack.url);
    const res = await rename(pair.caller, pair.callId, 'é'.repeat(200));
    expect(res.status).toBe(200);
    expect(res.json.caller.displayName).toBe('é'.repeat(128));
  });

  it('after the answer only the answering installation is told', async () => {
    const pair = await acceptedCall(stack.url);
    const { tablet, c1, c2 } = await calleeTabletAfterRelay(pair);
    const res = await rename(pair.caller, pair.callId, 'Renamed');
    expect(res.status).toBe(200);
    const events = await eventsUntil(pair.callee, c1, (e) => e.length >= 1);
    expect(events.map((e) => e.type)).toEqual(['call.renamed']);
    // Barrier: the callee's call.renamed is in the user's log, and the relay appends one change's
    // deliveries to one user in one appendEvents.lua call (docs/architecture.md "Relays"), so anything for the
    // tablet from this rename would already be there.
    expect(await eventsUntil(tablet, c2, () => true)).toEqual([]);
  });

  it('only the caller may rename (403); an ended call is returned unchanged; bad names are 400', async () => {
    const pair = await ringingCall(stack.url);
    expectProblem(
      await rename(pair.callee, pair.callId, 'x'),
      'forbidden',
      'only the caller can rename a call',
    );
    expectProblem(
      await rename(pair.caller, pair.callId, '   '),
      'invalid_request',
      'displayName: must not be empty',
    );
    await end(pair.caller, pair.callId, 'localHangup');
    const res = await rename(pair.caller, pair.callId, 'Late');
    expect(res.status).toBe(200);
    expect(res.json.state).toBe('ended');
    expect(res.json.caller.displayName).not.toBe('Late');
  });
});
