import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { acceptedCall, end, ringingCall, sleep } from '../support/fixtures.js';

/** Ring timers live in BullMQ's delayed set while a call rings, and go when it stops ringing. */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack?.stop());

const timerKey = (callId: string) => `cb:q:{timers}:expire.${callId}`;

async function eventually(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await check()) return;
    await sleep(30);
  }
  throw new Error(`timed out: ${what}`);
}

describe('ring timers', () => {
  it('a ringing call has one delayed timer job; answering removes it', async () => {
    const pair = await ringingCall(stack.url);
    await eventually(async () => (await stack.redis.exists(timerKey(pair.callId))) === 1, 'timer created');
    expect(await stack.redis.zscore('cb:q:{timers}:delayed', `expire.${pair.callId}`)).not.toBeNull();
    const { answer } = await import('../support/fixtures.js');
    expect((await answer(pair.callee, pair.callId)).status).toBe(200);
    await eventually(async () => (await stack.redis.exists(timerKey(pair.callId))) === 0, 'timer removed after the answer');
    expect(await stack.redis.zscore('cb:q:{timers}:delayed', `expire.${pair.callId}`)).toBeNull();
  });

  it('a cancelled call’s timer is removed too; the accepted call ending later changes nothing', async () => {
    const pair = await ringingCall(stack.url);
    await eventually(async () => (await stack.redis.exists(timerKey(pair.callId))) === 1, 'timer created');
    expect((await end(pair.caller, pair.callId, 'localHangup')).status).toBe(200);
    await eventually(async () => (await stack.redis.exists(timerKey(pair.callId))) === 0, 'timer removed after the cancel');

    const accepted = await acceptedCall(stack.url);
    await eventually(async () => (await stack.redis.exists(timerKey(accepted.callId))) === 0, 'timer removed after the answer');
    expect((await end(accepted.caller, accepted.callId, 'localHangup')).status).toBe(200);
    await sleep(200);
    expect(await stack.redis.exists(timerKey(accepted.callId))).toBe(0);
  });
});
