import { keys } from '../../src/redis/keys.js';
import { describe, expect, it } from 'vitest';
import { stackForFile, type Stack } from '../support/stack.js';
import { headCursor } from '../support/fixtures.js';
import { connect } from '../support/ws-client.js';
import { Sockets, createCall, online, readAllEvents, user, waitUntil } from './helpers.js';

/**
 * Explicit gaps (docs/protocol.md "Catching up over HTTP", docs/signaling.md "Server → client frames"): a cursor whose events were trimmed
 * away (EVENT_LOG_MAX_LEN) gets `trimmed`, a cursor from before the user's log was lost gets
 * `reset`, over WebSocket and over GET /v1/call-events, and delivery continues from the head.
 */

let stack: Stack;
let url: string;
const sockets = Sockets.closedAfterEachTest();

stackForFile({ EVENT_LOG_MAX_LEN: '10' }, (s) => {
  stack = s;
  url = s.url;
});

const logKey = (userId: string) => keys.eventLog({ prefix: 'cb', shards: 8 }, userId);
const metaKey = (userId: string) => keys.eventLogMeta({ prefix: 'cb', shards: 8 }, userId);

/** `n` invitations for `calleeUserId`, a few requests at a time, each from a new caller. */
async function invitations(calleeUserId: string, n: number): Promise<void> {
  let left = n;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (left > 0) {
        left--;
        await createCall(user(url, 1)[0]!, calleeUserId);
      }
    }),
  );
}

describe('trimmed', () => {
  it('a cursor older than the retained log gets a trimmed gap (WS frame and HTTP body), then delivery continues from the head', async () => {
    const [caller] = user(url, 1);
    const callee = user(url, 3);
    const [d, watcherDevice, late] = callee as [(typeof callee)[0], (typeof callee)[0], (typeof callee)[0]];
    const [watcher] = sockets.add(await online([watcherDevice], url));
    const start = await headCursor(d);

    // One event, and the cursor right after it (what a device would have stored).
    await createCall(caller!, d.userId);
    await watcher!.ws.waitForEvents(1);
    const old = (await readAllEvents(d, start)).cursor;

    // Many more: the log keeps about EVENT_LOG_MAX_LEN entries (trimming is approximate, by
    // whole stream nodes), so the first ones go.
    const total = 301;
    await invitations(d.userId, total - 1);
    await watcher!.ws.waitForEvents(total, 15_000);
    const head = watcher!.ws.lastCursor!;
    expect(await stack.redis.xlen(logKey(d.userId))).toBeLessThan(total);

    // WebSocket: a gap frame with the head cursor, then synced; no event is replayed.
    const ws = sockets.track(await connect(url, d.token, { cursor: old, name: 'stale' }));
    expect(ws.frames).toEqual([
      { type: 'gap', reason: 'trimmed', cursor: head },
      { type: 'synced', cursor: head },
    ]);

    // HTTP: the explicit gap, exactly as docs/protocol.md "Catching up over HTTP" fixes it; the cursor from before any event too.
    for (const cursor of [old, start]) {
      const res = await d.api.get(`/v1/call-events?cursor=${encodeURIComponent(cursor)}`);
      expect(res.status).toBe(200);
      expect(res.text).toBe(`{"gap":{"reason":"trimmed"},"events":[],"nextCursor":"${head}","hasMore":false}`);
    }
    // Continuing from the gap's cursor: no gap, nothing yet.
    const after = await d.api.get(`/v1/call-events?cursor=${encodeURIComponent(head)}`);
    expect(after.json).toEqual({ events: [], nextCursor: head, hasMore: false });

    // The boundary: a cursor at the newest trimmed entry lost nothing, so it is not a gap.
    const [[firstKept]] = (await stack.redis.xrange(logKey(d.userId), '-', '+', 'COUNT', 1)) as [[string, string[]]];
    const cursors = watcher!.ws.eventFrames().map((f) => f.cursor);
    const firstKeptIndex = cursors.findIndex((c) => c.endsWith(`_${firstKept}`));
    expect(firstKeptIndex).toBeGreaterThan(1);
    const boundary = await readAllEvents(late, cursors[firstKeptIndex - 1]!);
    expect(boundary.events).toEqual(watcher!.ws.events().slice(firstKeptIndex));
    const beyond = await late.api.get(`/v1/call-events?cursor=${encodeURIComponent(cursors[firstKeptIndex - 2]!)}`);
    expect(beyond.json.gap).toEqual({ reason: 'trimmed' });

    // A cursor that is still inside the retained log is not a gap: it gets the rest.
    const recent = watcher!.ws.eventFrames().at(-4)!.cursor;
    const rest = await readAllEvents(late, recent);
    expect(rest.events).toEqual(watcher!.ws.events().slice(-3));
    const resumed = sockets.track(await connect(url, late.token, { cursor: recent, name: 'recent' }));
    expect(resumed.frames.map((f) => f.type)).toEqual(['event', 'event', 'event', 'synced']);
    expect(resumed.events()).toEqual(watcher!.ws.events().slice(-3));

    // The socket that got the gap is live from the head.
    const next = await createCall(caller!, d.userId);
    const [e] = await ws.waitForEvents(1);
    expect(e!.callId).toBe(next.callId);
  }, 30_000);
});

describe('expired', () => {
  it('a log that expired as a whole (its stream key gone, its epoch kept) gives older cursors a trimmed gap, not a silent skip', async () => {
    const [caller] = user(url, 1);
    const [d] = user(url, 1);
    const start = await headCursor(d!);
    await createCall(caller!, d!.userId);
    let old = start;
    await waitUntil('one event', async () => {
      const r = await readAllEvents(d!, start);
      old = r.cursor;
      return r.events.length === 1;
    });
    await createCall(caller!, d!.userId);
    await waitUntil('two events', async () => (await readAllEvents(d!, start)).events.length === 2);

    // EVENT_LOG_MAX_AGE_MS without activity: the stream key expires, its metadata outlives it.
    expect(await stack.redis.del(logKey(d!.userId))).toBe(1);
    const whileEmpty = await d!.api.get(`/v1/call-events?cursor=${encodeURIComponent(old)}`);
    expect(whileEmpty.json.gap).toEqual({ reason: 'trimmed' });

    // A new event recreates the stream: the cursor from before the expiry still gets the gap.
    const next = await createCall(caller!, d!.userId);
    let res = whileEmpty;
    await waitUntil('the new event in the log', async () => {
      res = await d!.api.get(`/v1/call-events?cursor=${encodeURIComponent(whileEmpty.json.nextCursor as string)}`);
      return (res.json.events as unknown[]).length === 1;
    });
    expect(res.json.events[0].callId).toBe(next.callId);
    const stale = await d!.api.get(`/v1/call-events?cursor=${encodeURIComponent(old)}`);
    expect(stale.json.gap).toEqual({ reason: 'trimmed' });
  });
});

describe('reset', () => {
  it('after the user’s log keys are lost, an old cursor gets a reset gap (WS and HTTP), and new events flow', async () => {
    const [caller] = user(url, 1);
    const callee = user(url, 2);
    const [d, other] = callee as [(typeof callee)[0], (typeof callee)[0]];
    const start = await headCursor(d);
    await createCall(caller!, d.userId);
    await createCall(caller!, d.userId);
    let old = start;
    await waitUntil('two events', async () => {
      const r = await readAllEvents(d, start);
      old = r.cursor;
      return r.events.length === 2;
    });

    // The log is lost (e.g. a Redis failover without persistence).
    expect(await stack.redis.del(logKey(d.userId), metaKey(d.userId))).toBe(2);

    const ws = sockets.track(await connect(url, d.token, { cursor: old, name: 'after-reset' }));
    const [gap, synced] = ws.frames;
    expect(ws.frames).toHaveLength(2);
    expect(gap).toEqual({ type: 'gap', reason: 'reset', cursor: expect.any(String) });
    expect(synced).toEqual({ type: 'synced', cursor: gap!.cursor });
    expect(gap!.cursor).not.toBe(old);

    for (const cursor of [old, start]) {
      const res = await d.api.get(`/v1/call-events?cursor=${encodeURIComponent(cursor)}`);
      expect(res.status).toBe(200);
      expect(res.text).toBe(`{"gap":{"reason":"reset"},"events":[],"nextCursor":"${gap!.cursor as string}","hasMore":false}`);
    }

    // New events after the reset reach the device live, and the new cursors work over HTTP.
    const next = await createCall(caller!, d.userId);
    const [e] = await ws.waitForEvents(1);
    expect(e!.callId).toBe(next.callId);
    const fromGap = await readAllEvents(other, gap!.cursor as string);
    expect(fromGap.events).toEqual([e]);
  });

  it('a socket that is connected while the log is lost is told `reset` when the next event arrives, and stays live', async () => {
    const [caller] = user(url, 1);
    const [d] = user(url, 1);
    const [live] = sockets.add(await online([d!], url));
    await createCall(caller!, d!.userId);
    await live!.ws.waitForEvents(1);

    expect(await stack.redis.del(logKey(d!.userId), metaKey(d!.userId))).toBe(2);
    await createCall(caller!, d!.userId);
    const gap = await live!.ws.next('gap', 5000);
    expect(gap).toEqual({ type: 'gap', reason: 'reset', cursor: expect.any(String) });

    // Later events are delivered normally.
    const before = live!.ws.events().length;
    const third = await createCall(caller!, d!.userId);
    await live!.ws.until(() => live!.ws.events().some((e) => e.callId === third.callId), 5000, 'the third invitation');
    expect(live!.ws.events().length).toBeGreaterThan(before);
    expect(live!.ws.closeInfo).toBeUndefined();
  });
});
