import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import type { TestServer } from '../support/server.js';
import { answer, end, headCursor } from '../support/fixtures.js';
import { connect, type EventPayload } from '../support/ws-client.js';
import { Sockets, createCall, dedupe, expectInvited, expectRepeatsIdentical, online, readAllEvents, settleByBarrier, shape, user, via, waitUntil } from './helpers.js';

/**
 * Two full server processes (api, gateway, worker) on one Redis: an event caused by a request to
 * one process reaches a device connected to the other, and a device that was away resumes by
 * cursor on the other process (WebSocket replay, and GET /v1/call-events paging) with nothing
 * lost and nothing out of order.
 */

let stack: Stack;
let A: TestServer;
let B: TestServer;
const sockets = Sockets.closedAfterEachTest();

beforeAll(async () => {
  stack = await startStack();
  A = stack.servers[0]!;
  B = await stack.addServer();
});

afterAll(async () => {
  await stack?.stop();
});

describe('two processes on one Redis', () => {
  it('a call created through process A rings a device connected to process B (within 2 s)', async () => {
    const [caller] = user(A.url, 1);
    const [b1] = sockets.add(await online(user(B.url, 1), B.url));
    const call = await createCall(caller!, b1!.userId);
    // Bounded: fails unless it arrives within 2 s.
    const [invited] = await b1!.ws.waitForEvents(1, 2000);
    expectInvited(invited!, call);
  });

  it('the answer through process B reaches the caller’s device on process A, and the other callee device on A', async () => {
    const [a1] = sockets.add(await online(user(A.url, 1), A.url));
    const callee = user(B.url, 2);
    const [b1] = sockets.add(await online([callee[0]!], B.url));
    const [b2] = sockets.add(await online([callee[1]!], A.url));
    const call = await createCall(a1!, b1!.userId);
    await Promise.all([b1!.ws.waitForEvents(1), b2!.ws.waitForEvents(1)]);
    const won = await answer(b1!, call.callId);
    expect(won.status, won.text).toBe(200);
    const [ea1, , eb2] = await settleByBarrier(
      A.url,
      call.callId,
      [
        [a1!, 1],
        [b1!, 1],
        [b2!, 2],
      ],
      2000,
    );
    expect(ea1![0]!.type).toBe('call.accepted');
    expect(eb2![1]!.reason).toBe('answeredElsewhere');
  });
});

describe('resume by cursor', () => {
  /**
   * Produces a varied history for the callee while `away` is offline: a cancel, a call answered by
   * another installation (answeredElsewhere for `away`), a hang-up only the winner hears (an entry
   * `away` must skip), a decline by another installation, and a call left ringing.
   */
  async function history(caller: ReturnType<typeof user>[number], other: ReturnType<typeof user>[number], calleeUserId: string) {
    const c1 = await createCall(caller, calleeUserId);
    expect((await end(caller, c1.callId, 'localHangup')).status).toBe(200);
    const c2 = await createCall(caller, calleeUserId);
    expect((await answer(other, c2.callId)).status).toBe(200);
    expect((await end(caller, c2.callId, 'localHangup')).status).toBe(200);
    const c3 = await createCall(caller, calleeUserId);
    expect((await end(other, c3.callId, 'declined')).status).toBe(200);
    const c4 = await createCall(caller, calleeUserId);
    return [c1, c2, c3, c4].map((c) => c.callId);
  }

  /**
   * The same events, each call's in order (calls on different outbox shards may interleave in
   * the log: docs/architecture.md "Relays").
   */
  function expectPerCallOrder(actual: string[], expected: string[]): void {
    expect([...actual].sort()).toEqual([...expected].sort());
    const callOf = (e: string) => e.split('/')[1];
    for (const callId of new Set(expected.map(callOf))) {
      expect(actual.filter((e) => callOf(e) === callId)).toEqual(expected.filter((e) => callOf(e) === callId));
    }
  }

  /** What `away` must see of history(): its audience, in order. */
  function expectedFor(ids: string[]): string[] {
    const [c1, c2, c3, c4] = ids;
    return [
      `call.invited/${c1}`,
      `call.ended/${c1}/callerCancelled`,
      `call.invited/${c2}`,
      `call.ended/${c2}/answeredElsewhere`,
      `call.invited/${c3}`,
      `call.ended/${c3}/declined`,
      `call.invited/${c4}`,
    ];
  }

  it('a device that disconnects and reconnects to the OTHER process with its last cursor gets exactly the missed events, in order', async () => {
    const [caller] = user(A.url, 1);
    const callee = user(A.url, 2);
    const [away, other] = callee as [(typeof callee)[0], (typeof callee)[0]];

    // Online on A: receives one invitation, then goes away.
    const [onA] = sockets.add(await online([away], A.url));
    const first = await createCall(caller!, away.userId);
    await onA!.ws.waitForEvents(1);
    const cursor = onA!.ws.lastCursor!;
    await onA!.ws.close();

    // The history is made through B's API while the device is offline.
    const ids = await history(via(caller!, B.url), via(other, B.url), away.userId);
    // Wait until the relay wrote all of it (the HTTP log read is the reference).
    let reference: EventPayload[] = [];
    await waitUntil('the history in the log', async () => {
      reference = (await readAllEvents(away, cursor)).events;
      return reference.length >= 7;
    });
    expectPerCallOrder(shape(reference), expectedFor(ids));

    const back = sockets.track(await connect(B.url, away.token, { cursor, name: 'back-on-B' }));
    await back.waitForEvents(7);
    // The replay comes before `synced`, and is exactly the missed events (duplicates only as
    // repeated eventIds), in log order, with the very payloads the HTTP log holds.
    const types = back.frames.map((f) => f.type);
    expect(types.lastIndexOf('event')).toBeLessThan(types.indexOf('synced'));
    expectRepeatsIdentical(back.events());
    const replayed = dedupe(back.events());
    expect(replayed).toEqual(reference);
    expect(replayed.some((e) => e.callId === first.callId && e.type === 'call.invited')).toBe(false);
    expect(back.lastCursor).toBe((await readAllEvents(away, cursor)).cursor);

    // After the replay it is live on B.
    const count = back.events().length;
    const live = await createCall(caller!, away.userId);
    await back.waitForEvents(count + 1);
    expect(back.events().at(-1)!.callId).toBe(live.callId);
  });

  it('resuming while events keep coming loses nothing: replay and live events merge in log order', async () => {
    const [caller] = user(A.url, 1);
    const callee = user(A.url, 1);
    const d = callee[0]!;
    const cursor = await headCursor(d);
    // Some history before the reconnect…
    const before = await Promise.all(Array.from({ length: 5 }, () => createCall(caller!, d.userId)));
    // …and more while it reconnects to B and syncs.
    const producing = (async () => {
      const out = [];
      for (let i = 0; i < 20; i++) out.push(await createCall(caller!, d.userId));
      return out;
    })();
    const ws = sockets.track(await connect(B.url, d.token, { cursor, name: 'racing' }));
    const during = await producing;
    const all = [...before, ...during].map((c) => c.callId);
    await ws.until(() => new Set(ws.events().map((e) => e.eventId)).size >= all.length, 5000, 'all invitations');

    expectRepeatsIdentical(ws.events());
    const got = dedupe(ws.events());
    expect(new Set(got.map((e) => e.callId))).toEqual(new Set(all));
    expect(got.every((e) => e.type === 'call.invited')).toBe(true);
    // Log order: exactly the order the HTTP log returns.
    const reference = (await readAllEvents(d, cursor)).events;
    expect(got).toEqual(reference);
    // Duplicates, if any, carry the same eventId and cursor as the original.
    const byCursor = new Map<string, string>();
    for (const f of ws.eventFrames()) {
      const seen = byCursor.get(f.cursor);
      if (seen !== undefined) expect(f.event.eventId).toBe(seen);
      else byCursor.set(f.cursor, f.event.eventId);
    }
  });

  it('GET /v1/call-events pages the same history with `limit`, on either process', async () => {
    const [caller] = user(A.url, 1);
    const callee = user(A.url, 2);
    const [away, other] = callee as [(typeof callee)[0], (typeof callee)[0]];
    const cursor = await headCursor(away);
    const ids = await history(caller!, other, away.userId);
    let all: EventPayload[] = [];
    await waitUntil('the history in the log', async () => {
      all = (await readAllEvents(away, cursor)).events;
      return all.length >= 7;
    });
    expectPerCallOrder(shape(all), expectedFor(ids));

    for (const [base, limit] of [
      [A.url, 1],
      [B.url, 2],
      [B.url, 3],
    ] as const) {
      const paged = await readAllEvents(via(away, base), cursor, limit);
      expect(paged.events).toEqual(all);
      for (const page of paged.pages) {
        expect(Object.keys(page.json).sort()).toEqual(['events', 'hasMore', 'nextCursor']);
        expect((page.json.events as unknown[]).length).toBeLessThanOrEqual(limit);
      }
      // More than one page was needed; only the last says no more follows, and reading on from
      // its cursor finds nothing.
      expect(paged.pages.length).toBeGreaterThanOrEqual(Math.ceil(7 / limit));
      expect(paged.pages.map((p) => p.json.hasMore)).toEqual([...paged.pages.slice(1).map(() => true), false]);
      const after = await via(away, base).api.get(`/v1/call-events?cursor=${encodeURIComponent(paged.cursor)}&limit=${limit}`);
      expect(after.json).toEqual({ events: [], nextCursor: paged.cursor, hasMore: false });
    }

    // Resuming in the middle: the cursor after a first page of 3 log entries gives exactly the
    // rest. The page holds fewer than 3 events when one of those entries was for the other
    // installation (calls on different outbox shards interleave, so which entries come first varies).
    const firstPage = await away.api.get(`/v1/call-events?cursor=${encodeURIComponent(cursor)}&limit=3`);
    const firstEvents = firstPage.json.events as EventPayload[];
    expect(firstEvents.length).toBeLessThanOrEqual(3);
    expect(firstPage.json.hasMore).toBe(true);
    expect(firstEvents).toEqual(all.slice(0, firstEvents.length));
    const rest = await readAllEvents(away, firstPage.json.nextCursor as string);
    expect(rest.events).toEqual(all.slice(firstEvents.length));
    expect(rest.events.length).toBeGreaterThan(0);

    // The other installation sees its own audience of the same log (no answeredElsewhere: it won).
    const otherView = await readAllEvents(other, cursor);
    expect(otherView.events.some((e) => e.reason === 'answeredElsewhere')).toBe(false);
    expect(otherView.events.filter((e) => e.reason === 'remoteEnded')).toHaveLength(1);
  });
});
