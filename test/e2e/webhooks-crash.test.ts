import { describe, expect, it } from 'vitest';
import { device, end, uid, relayDone, DEFAULT_CALL_SHARDS } from '../support/fixtures.js';
import { createCall, waitUntil } from './helpers.js';
import { startStack, forFile, type Stack } from '../support/stack.js';
import type { TestServer } from '../support/server.js';
import { newSecret, startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';
import { keys } from '../../src/redis/keys.js';
import { WEBHOOK_GROUP } from '../../src/webhooks/streamReader.js';

/**
 * At least once through a crash (docs/webhooks.md "Delivery"): the worker is killed with SIGKILL
 * while its deliveries hang at the receiver; a new worker sends every event again, and after
 * deduplication by webhook-id each arrives exactly once. The second case kills it only after its
 * relay acknowledged the changes: then only the webhook stream holds the deliveries, and the new
 * worker takes the dead one's entries over.
 */

const KS = { prefix: 'cb', shards: DEFAULT_CALL_SHARDS };

const secret = newSecret();
let stack: Stack;
let receiver: WebhookReceiver;
let env: Record<string, string>;

forFile(
  async () => {
    receiver = await startWebhookReceiver([secret]);
    env = { WEBHOOKS: JSON.stringify([{ id: 'backend', url: receiver.url, secret }]), WEBHOOK_TIMEOUT_MS: '60000' };
    stack = await startStack({ ROLES: 'api', ...env });
    return {
      async stop() {
        await stack.stop();
        await receiver.close();
      },
    };
  },
  () => {},
);

/** `n` calls created and ended by one caller. */
async function endedCalls(n: number): Promise<string[]> {
  const caller = device(stack.url);
  const calls: string[] = [];
  for (let i = 0; i < n; i++) {
    const { callId } = await createCall(caller, uid('callee'));
    await end(caller, callId, 'localHangup');
    calls.push(callId);
  }
  return calls;
}

/**
 * Kills the worker with SIGKILL and starts another with the receiver answering 204; then waits
 * until every event of `calls` was answered with 2xx since the restart (the hung ones never were).
 * Returns the new worker, the events, and how many requests came before the restart.
 */
async function replaceWorker(worker: TestServer, calls: readonly string[]): Promise<{ worker: TestServer; expected: string[]; beforeRestart: number }> {
  worker.child.kill('SIGKILL');
  await new Promise((r) => worker.child.once('exit', r));
  const beforeRestart = receiver.received.length;
  receiver.answer = () => ({ status: 204 });
  const next = await stack.addServer({ ROLES: 'worker', ...env });
  const expected = calls.flatMap((callId) => ['call.created', 'call.ended'].map((type) => `${type} ${callId}`));
  const answered = () => new Set(receiver.received.slice(beforeRestart).map((w) => `${w.json.type} ${w.json.data.callId}`));
  await waitUntil('every event answered after the restart', () => expected.every((e) => answered().has(e)), 40_000);
  return { worker: next, expected, beforeRestart };
}

describe('worker killed mid-delivery', () => {
  it('every event reaches the receiver at least once, and exactly once per webhook-id', async () => {
    const first = await stack.addServer({ ROLES: 'worker', ...env });
    receiver.answer = () => 'hang';
    const calls = await endedCalls(5);
    await waitUntil('deliveries hanging at the receiver', () => receiver.received.length >= 1, 10_000);
    const { worker, expected, beforeRestart } = await replaceWorker(first, calls);
    // Each event has one webhook-id, however often it was sent.
    const idsPerEvent = new Map<string, Set<string>>();
    for (const w of receiver.received) {
      const key = `${w.json.type} ${w.json.data.callId}`;
      if (!idsPerEvent.has(key)) idsPerEvent.set(key, new Set());
      idsPerEvent.get(key)!.add(w.id);
    }
    expect([...idsPerEvent.keys()].sort()).toEqual([...expected].sort());
    for (const ids of idsPerEvent.values()) expect(ids.size).toBe(1);
    expect(receiver.unique().size).toBe(expected.length);
    // What hung unanswered when the worker died was sent again by the new one.
    const hung = new Set(receiver.received.slice(0, beforeRestart).map((w) => w.id));
    const after = new Set(receiver.received.slice(beforeRestart).map((w) => w.id));
    expect(hung.size).toBeGreaterThan(0);
    for (const id of hung) expect(after.has(id)).toBe(true);
    await worker.stop();
  }, 60_000);

  it("after the relay acknowledged the changes, a new worker takes over the dead one's stream entries", async () => {
    const first = await stack.addServer({ ROLES: 'worker', ...env });
    const received = receiver.received.length;
    receiver.answer = () => 'hang';
    const calls = await endedCalls(3);
    // The relay is done: no outbox entry is left to hand over again, only the stream holds them.
    await relayDone(stack.redis, KS, calls);
    const stream = keys.webhookStream(KS, 0);
    await waitUntil('deliveries hanging at the receiver', () => receiver.received.length > received, 10_000);
    const [pending] = (await stack.redis.xpending(stream, WEBHOOK_GROUP)) as [number];
    expect(pending).toBeGreaterThan(0);
    const { worker } = await replaceWorker(first, calls);
    await waitUntil('the stream acknowledged', async () => ((await stack.redis.xpending(stream, WEBHOOK_GROUP)) as [number])[0] === 0, 10_000);
    await worker.stop();
  }, 60_000);
});
