import { describe, expect, it } from 'vitest';
import { stackForFile, type Stack } from '../support/stack.js';
import { answer, end, uid } from '../support/fixtures.js';
import { Sockets, callEvents, createCall, earlyEvents, online, settleByBarrier, user } from './helpers.js';

/**
 * Early events (docs/signaling.md "Early events"): on a single Redis the script that makes a change
 * publishes it at once, and a socket gets the change's events ahead of the log, without a cursor,
 * but only while that keeps each call's events in revision order: a socket that joined during a
 * call, or lost live messages, gets the rest of that call from the log alone. Every check also
 * runs earlyEvents (helpers.ts): an early event is always one of the log's, byte for byte, and
 * comes before the log's copy. A single Redis only: on a cluster no event comes early, which the
 * signaling suites check there (signaling-audience.test.ts).
 */

let stack: Stack;
let url: string;
const sockets = Sockets.closedAfterEachTest();
stackForFile({}, (s) => {
  stack = s;
  url = s.url;
});

/** The revisions of a list of events, as numbers. */
const revisions = (events: { revision: string }[]) => events.map((e) => Number(e.revision));

describe('early events', () => {
  it('an answer reaches the caller early; the callee device that connected during the call gets the rest of it from the log alone', async () => {
    const [a] = sockets.add(await online(user(url, 1), url));
    const [b1, b2] = user(url, 2);
    const [on1] = sockets.add(await online([b1!], url));
    const call = await createCall(a!, b1!.userId);
    await on1!.ws.waitForEvents(1);
    // b2 comes online while the call rings (a phone woken by the push).
    const [on2] = sockets.add(await online([b2!], url));

    expect((await answer(on1!, call.callId)).status).toBe(200);
    expect((await end(a!, call.callId, 'localHangup')).status).toBe(200);
    const [ea, e1] = await settleByBarrier(url, call.callId, [
      [a!, 1],
      [on1!, 2],
      [on2!, 1],
    ]);
    expect(ea!.map((e) => e.type)).toEqual(['call.accepted']);
    expect(e1!.map((e) => `${e.type}/${String(e.reason ?? '')}`)).toEqual(['call.invited/', 'call.ended/remoteEnded']);
    expect(callEvents(on2!).map((e) => `${e.type}/${String(e.reason ?? '')}`)).toEqual(['call.ended/answeredElsewhere']);
    // Online since before the call: everything early too. Joined during the call: nothing early.
    expect(earlyEvents(a!)).toEqual(ea);
    expect(earlyEvents(on1!)).toEqual(e1);
    expect(earlyEvents(on2!)).toEqual([]);
  });

  it('a burst of renames reaches the callee early in revision order, each before its copy from the log', async () => {
    const [a] = sockets.add(await online(user(url, 1), url));
    const [b] = sockets.add(await online(user(url, 1), url));
    const call = await createCall(a!, b!.userId);
    // Sent at once over the caller's socket, without waiting for each reply.
    const replies = await Promise.all(
      Array.from({ length: 8 }, (_, i) => a!.ws.command({ type: 'rename', callId: call.callId, operationId: uid('op'), displayName: `Alice ${i}` })),
    );
    expect(replies.map((r) => r.status)).toEqual(Array(8).fill(200));
    const [events] = await settleByBarrier(url, call.callId, [[b!, 9]]);
    expect(revisions(events!)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(earlyEvents(b!)).toEqual(events);
  });

  it('after its Redis subscription was cut, a socket gets a call in progress from the log alone, and the next call early again', async () => {
    const [a] = sockets.add(await online(user(url, 1), url));
    const [b] = sockets.add(await online(user(url, 1), url));
    const first = await createCall(a!, b!.userId);
    await b!.ws.waitForEvents(1);

    // The gateway's subscriber connection dies: ioredis reconnects and subscribes again, and every
    // socket re-reads its log (a second `synced`). Notices published meanwhile would be lost.
    const syncedBefore = a!.ws.frames.filter((f) => f.type === 'synced').length;
    const killed = Number(await stack.redis.client('KILL', 'TYPE', 'pubsub'));
    expect(killed).toBeGreaterThan(0);
    await a!.ws.until(() => a!.ws.frames.filter((f) => f.type === 'synced').length > syncedBefore, 10_000, 'the resync');

    expect((await answer(b!, first.callId)).status).toBe(200);
    expect((await end(a!, first.callId, 'localHangup')).status).toBe(200);
    const second = await createCall(a!, b!.userId);
    expect((await answer(b!, second.callId)).status).toBe(200);
    const [ea, eb] = await settleByBarrier(url, [first.callId, second.callId], [
      [a!, 2],
      [b!, 3],
    ]);
    const shape = (events: { type: string; callId: string }[]) => events.map((e) => `${e.type}/${e.callId === first.callId ? 'first' : 'second'}`);
    expect(shape(ea!).sort()).toEqual(['call.accepted/first', 'call.accepted/second']);
    expect(shape(eb!).sort()).toEqual(['call.ended/first', 'call.invited/first', 'call.invited/second']);
    expect(shape(earlyEvents(a!))).toEqual(['call.accepted/second']);
    // The callee had the first call's invitation early, before the cut.
    expect(shape(earlyEvents(b!))).toEqual(['call.invited/first', 'call.invited/second']);
  });
});
