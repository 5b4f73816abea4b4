import { describe, expect, it } from 'vitest';
import { device, end, uid } from '../support/fixtures.js';
import { createCall, waitUntil } from './helpers.js';
import { startStack, forFile, type Stack } from '../support/stack.js';
import type { TestServer } from '../support/server.js';
import { newSecret, startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * At least once through a crash (docs/webhooks.md "Delivery"): the worker is killed with SIGKILL
 * while its deliveries hang at the receiver; a new worker sends every event again, and after
 * deduplication by webhook-id each arrives exactly once.
 */

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

describe('worker killed mid-delivery', () => {
  it('every event reaches the receiver at least once, and exactly once per webhook-id', async () => {
    let worker: TestServer = await stack.addServer({ ROLES: 'worker', ...env });
    receiver.answer = () => 'hang';
    const caller = device(stack.url);
    const calls: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { callId } = await createCall(caller, uid('callee'));
      await end(caller, callId, 'localHangup');
      calls.push(callId);
    }
    await waitUntil('deliveries hanging at the receiver', () => receiver.received.length >= 1, 10_000);
    worker.child.kill('SIGKILL');
    await new Promise((r) => worker.child.once('exit', r));
    const beforeRestart = receiver.received.length;
    receiver.answer = () => ({ status: 204 });
    worker = await stack.addServer({ ROLES: 'worker', ...env });

    const expected = calls.flatMap((callId) => ['call.created', 'call.ended'].map((type) => `${type} ${callId}`));
    // Answered with 2xx: everything received since the restart (the hung ones never were).
    const answered = () => new Set(receiver.received.slice(beforeRestart).map((w) => `${w.json.type} ${w.json.data.callId}`));
    await waitUntil('every event answered after the restart', () => expected.every((e) => answered().has(e)), 40_000);
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
});
