import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { device, uid } from '../support/fixtures.js';
import { connect, type EventPayload, type SignalingClient } from '../support/ws-client.js';
import { keys } from '../../src/redis/keys.js';
import { Sockets, dedupe, expectRepeatsIdentical, waitUntil } from './helpers.js';
import { sleep } from '../support/wait.js';

/**
 * A socket that cannot keep up (its send buffer exceeds WS_MAX_BACKPRESSURE_BYTES, at its default) is closed with
 * 4008 (docs/signaling.md), and the device loses nothing: it reconnects with the last cursor it
 * processed and gets the rest.
 *
 * The client stops reading from its TCP socket. The kernel buffers on both ends (several MB on
 * loopback) fill first; only then does the server's own buffer grow, so the test produces events
 * until the server drops the socket, which it observes without touching the server: the user's
 * live Pub/Sub channel loses its only subscriber when the server closes the user's only socket.
 */

let stack: Stack;
let url: string;
const sockets = Sockets.closedAfterEachTest();

beforeAll(async () => {
  // The production cap (WS_MAX_BACKPRESSURE_BYTES, 256 KiB by default): the server's own buffer
  // really fills to it, after the kernel's.
  stack = await startStack({ EVENT_LOG_MAX_LEN: '50000' });
  url = stack.url;
});

afterAll(async () => {
  if (stack && (stack.servers[0]!.child.exitCode !== null || stack.servers[0]!.child.signalCode !== null)) console.log(stack.servers[0]!.logs().slice(-5000));
  await stack?.stop();
});

async function subscribers(userId: string): Promise<number> {
  const reply = (await stack.redis.pubsub('SHARDNUMSUB', keys.liveChannel({ prefix: 'cb', shards: 8 }, userId))) as [string, number];
  return Number(reply[1]);
}

describe('slow consumer', () => {
  // What a device sees depends on when it reads again (docs/signaling.md "Keepalive and limits"):
  // the 4008 waits behind everything queued, and the server drops a connection that leaves it
  // unread for the ping grace. Either way the device loses nothing.
  it('is closed with 4008 once its buffer overflows and, reading again at once, gets what was queued, then resumes from its last processed cursor without loss', async () => {
    await overflowAndResume({ dropped: false, code: 4008 });
  }, 90_000);

  it('is dropped (1006) when it leaves the 4008 unread for the ping grace, and resumes from its last processed cursor without loss', async () => {
    await overflowAndResume({ dropped: true, code: 1006 });
  }, 120_000);
});

/** A device that stops reading until the server closes it (`dropped`: until the connection itself is gone), then reads, sees `code`, and resumes. */
async function overflowAndResume({ dropped, code }: { dropped: boolean; code: number }): Promise<void> {
  // Large invitations (long caller name, handle and callId) fill the buffers with fewer calls;
  // the calls come from many callers, so a per-user limit of one caller does not get in the way.
  const callers = Array.from({ length: 32 }, () => device(url, `caller-${'c'.repeat(80)}-${randomUUID()}`, uid('inst'), 'N'.repeat(256)));
  const callee = device(url);
  const slow = sockets.track(await connect(url, callee.token, { name: 'slow' }));
  expect(await subscribers(callee.userId)).toBe(1);
  slow.pauseReading();
  // A slow device is still alive: it keeps talking (a ping now and then) while it falls behind
  // on reading, so the server's idle timeout (WS_IDLE_TIMEOUT_S) is not what closes it.
  const keepAlive = setInterval(() => slow.ws.ping(), 2_000);

  // The device reads again as soon as the server has closed it (watched without touching the
  // server), not once the producers are done; or only once the connection itself is gone.
  let closedByServer = false;
  let producing = true;
  const watcher = (async () => {
    while (producing && !(closedByServer = (await subscribers(callee.userId)) === 0)) await sleep(20);
    clearInterval(keepAlive);
    if (dropped && closedByServer) await waitUntil('the server dropping the connection', () => !serverEndOpen(slow.localPort), 60_000);
    slow.resumeReading();
  })();
  const created: string[] = [];
  const createOne = async () => {
    const callId = `${randomUUID()}-${'x'.repeat(88)}`;
    const res = await callers[created.length % callers.length]!.api.post('/v1/calls', { callId, calleeUserId: callee.userId, operationId: uid('op') });
    expect(res.status, res.text).toBe(201);
    created.push(callId);
  };
  // Produce until the server has closed the socket (or give up at a cap far above any buffer).
  try {
    await Promise.all(Array.from({ length: 8 }, async () => {
      for (let i = 0; i < 2_000 && !closedByServer; i++) await createOne();
    }));
  } finally {
    producing = false;
    await watcher;
  }
  expect(closedByServer, `the server still holds the socket after ${created.length} events`).toBe(true);

  // The client catches up with what was buffered, then sees the close code.
  const closed = await withTimeout(slow.closed, 20_000, 'the close of the slow socket');
  expect(closed.code).toBe(code);
  expect(slow.undecodable()).toEqual([]);
  const processed = slow.events();
  // A dropped connection may lose what was queued for it, even all of it.
  if (!dropped) expect(processed.length).toBeGreaterThan(0);
  expect(processed.length).toBeLessThan(created.length);
  // What it got before the close is the start of its log without holes, in order.
  const order = await logOrder(callee.userId, created.length);
  expect(order).toHaveLength(created.length);
  expectRepeatsIdentical(processed);
  const processedOnce = dedupe(processed);
  expect(processedOnce.map((e) => e.callId)).toEqual(order.slice(0, processedOnce.length));
  const resumeFrom = slow.lastCursor!;

  // Reconnect with the last processed cursor (a real client retries on 4008 or 1006 the same way).
  const received = [...processed];
  let cursor = resumeFrom;
  let attempts = 0;
  for (;;) {
    attempts++;
    const again: SignalingClient = sockets.track(await connect(url, callee.token, { cursor, name: `resume-${attempts}`, waitSynced: false }));
    const outcome = await Promise.race([
      again.next('synced', 20_000).then(() => 'synced' as const),
      again.closed.then((c) => c.code),
    ]);
    if (outcome === 'synced') {
      // Replayed up to the head; whatever the relay still appends arrives live.
      await again.until(() => dedupe([...received, ...again.events()]).length >= created.length, 10_000, 'every invitation');
      received.push(...again.events());
      break;
    }
    received.push(...again.events());
    expect(outcome).toBe(4008);
    expect(attempts, 'resuming keeps getting closed').toBeLessThan(20);
    cursor = again.lastCursor ?? cursor;
  }
  // Everything missed arrived: every invitation exactly once by eventId, in creation order.
  expectRepeatsIdentical(received);
  const unique = dedupe(received);
  expect(unique).toHaveLength(created.length);
  expect(unique.map((e) => e.callId)).toEqual(order);
  expect(new Set(unique.map((e) => e.callId))).toEqual(new Set(created));
}

/**
 * The callIds of the user's log in log order (the reference for delivery order), once it holds
 * `n` distinct events. The relay delivers at least once, so an entry may be repeated (same
 * eventId); repeats are dropped here as a device drops them.
 */
async function logOrder(userId: string, n: number): Promise<string[]> {
  let events: EventPayload[] = [];
  await waitUntil(`${n} events in the log`, async () => {
    const entries = (await stack.redis.xrange(keys.eventLog({ prefix: 'cb', shards: 8 }, userId), '-', '+')) as [string, string[]][];
    events = entries.map(([, fields]) => JSON.parse(fields[fields.indexOf('p') + 1]!) as EventPayload);
    return dedupe(events).length >= n;
  }, 20_000);
  expectRepeatsIdentical(events);
  return dedupe(events).map((e) => e.callId);
}

/**
 * Whether the server still holds its end of the loopback connection from `clientPort` open, by the
 * kernel's table: once the server closes it, that end leaves ESTABLISHED (01) while the client's,
 * not reading, has not yet seen anything.
 */
function serverEndOpen(clientPort: number): boolean {
  const port = `:${clientPort.toString(16).toUpperCase().padStart(4, '0')}`;
  return readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .some((line) => {
      const [, , remote, state] = line.trim().split(/\s+/);
      return remote?.endsWith(port) && state === '01';
    });
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms))]);
}
