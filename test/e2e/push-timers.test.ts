import { sleep, waitUntil } from '../support/wait.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { startServer, type TestServer } from '../support/server.js';
import { DEFAULT_CALL_SHARDS, end, eventsUntil, getCall, headCursor, relayDone } from '../support/fixtures.js';
import { Sockets, createCall, endedAt, expectEnded, expectInvited, online, user } from './helpers.js';
import { androidToken, iosToken, logRecords, registerAndroid, registerIos } from './push-helpers.js';

/**
 * Expiry timers live in Redis (BullMQ delayed jobs), not in a process: a ringing call ends on time
 * as `unanswered` even when the worker that scheduled its timer dies in the middle of the ring
 * window and another worker takes over. And a server without push providers still starts, says
 * so, and rings devices over signaling.
 */

/**
 * Long enough that the replacement worker is up well inside the window: a worker process takes
 * about 1 s to start on a quiet machine, but took over 7 s in a full run on a starved one (its
 * cluster, the bench smoke test and two other files beside it), and a window it missed would
 * measure process start-up, not the timer.
 */
const RING_MS = 20_000;
let stack: Stack;
/** api + gateway: where requests and WebSockets go. */
let A: TestServer;
/** The worker process (relay, timers, pushes); no push providers configured. */
let B: TestServer;
const sockets = Sockets.closedAfterEachTest();

beforeAll(async () => {
  stack = await startStack({ ROLES: 'api,gateway', RING_TIMEOUT_MS: String(RING_MS) });
  A = stack.servers[0]!;
  B = await stack.addServer({ ROLES: 'worker' });
});

afterAll(async () => {
  await stack?.stop();
});

describe('worker restart during the ring window', () => {
  it('SIGKILL of the worker 1 s into a 20 s ring, a new worker started: both sides get call.ended unanswered at most 1.5 s after expiresAtMs', async () => {
    const [caller] = sockets.add(await online(user(A.url, 1), A.url));
    const [callee] = sockets.add(await online(user(A.url, 1), A.url));
    const call = await createCall(caller!, callee!.userId);
    const expiresAtMs = call.snapshot.expiresAtMs as number;
    expect(expiresAtMs - (call.snapshot.createdAtMs as number)).toBe(RING_MS);
    // The worker's relay delivered the invitation (so it also scheduled the timer).
    const [invited] = await callee!.ws.waitForEvents(1, 3000);
    expectInvited(invited!, call);

    await sleep(Math.max(0, (call.snapshot.createdAtMs as number) + 1000 - Date.now()));
    const exited = new Promise((r) => B.child.once('exit', r));
    B.child.kill('SIGKILL');
    await exited;
    const restarted = await stack.addServer({ ROLES: 'worker' });
    expect(Date.now(), 'the new worker started inside the ring window (else the bound below says nothing)').toBeLessThan(expiresAtMs);

    const ended = (ws: typeof callee) => ws!.ws.events().find((e) => e.type === 'call.ended');
    // Both sides are told within 1.5 s of expiresAtMs (the waits fail past that bound).
    const bound = () => Math.max(1, expiresAtMs + 1500 - Date.now());
    await callee!.ws.until(() => ended(callee) !== undefined, bound(), 'call.ended within 1.5 s of expiresAtMs');
    await caller!.ws.until(() => ended(caller) !== undefined, bound(), 'call.ended within 1.5 s of expiresAtMs');

    const snap = await getCall(caller!, call.callId);
    expect(snap.json).toMatchObject({ state: 'ended', endReason: 'unanswered' });
    expect(snap.json.endedAtMs as number).toBeGreaterThanOrEqual(expiresAtMs);
    expectEnded(ended(callee)!, 'unanswered', endedAt(snap.json));
    expectEnded(ended(caller)!, 'unanswered', endedAt(snap.json));
    expect(restarted.child.exitCode).toBeNull();
  }, 40_000);
});

describe('push not configured', () => {
  it('a worker without push variables starts and warns, once per platform, that push is not configured', () => {
    const warnings = logRecords(B.logs()).filter((r) => /push is not configured/.test(String(r.msg)));
    expect(warnings.map((r) => [r.level, r.msg])).toEqual([
      ['warn', expect.stringMatching(/^iOS push is not configured/)],
      ['warn', expect.stringMatching(/^Android push is not configured/)],
    ]);
  });

  it('a server with every role and no push variables starts, warns, accepts push tokens and rings the callee over signaling', async () => {
    // Its own key prefix: its workers must not take the jobs of the processes above.
    const server = await startServer({ ...stack.redisEnv, REDIS_PREFIX: 'nopush' });
    try {
      const logs = logRecords(server.logs());
      expect(logs.some((r) => r.level === 'warn' && /^iOS push is not configured/.test(String(r.msg)))).toBe(true);
      expect(logs.some((r) => r.level === 'warn' && /^Android push is not configured/.test(String(r.msg)))).toBe(true);
      expect(logs.some((r) => r.msg === 'listening')).toBe(true);

      const [caller] = user(server.url, 1);
      const [iphone, android] = user(server.url, 2);
      await registerIos(iphone!, iosToken());
      await registerAndroid(android!, androidToken());
      const cursor = await headCursor(android!);
      const [online1] = sockets.add(await online([iphone!], server.url));
      const call = await createCall(caller!, iphone!.userId);
      const [invited] = await online1!.ws.waitForEvents(1, 3000);
      expectInvited(invited!, call);
      const logged = await eventsUntil(android!, cursor, (e) => e.length >= 1);
      expect(logged[0]!.eventId).toBe(invited!.eventId);
      // Barrier: the relay is done with the creation (its push handler included, which logs what
      // goes wrong), and a later line (the hang-up's) is out, so the lines before it are too.
      await relayDone(stack.redis, { prefix: 'nopush', shards: DEFAULT_CALL_SHARDS }, [call.callId]);
      expect((await end(caller!, call.callId, 'localHangup')).status).toBe(200);
      await waitUntil('the hang-up logged', () => logRecords(server.logs()).some((r) => r.msg === 'call change' && r.callId === call.callId && r.change === 'ended'));
      expect(server.child.exitCode).toBeNull();
      // Nothing went wrong trying to push without providers.
      expect(logRecords(server.logs()).filter((r) => r.level === 'error' || r.level === 'fatal')).toEqual([]);
    } finally {
      await sockets.closeAll();
      await server.stop();
    }
  });
});
