import { describe, expect, it } from 'vitest';
import { Admission } from '../../src/gateway/admission.js';
import { retryAfterOf } from '../../packages/client/src/signaling.js';

/** src/gateway/admission.ts: a token bucket of new sockets, and the times to come back it hands out. */
describe('admission control', () => {
  it('admits one second’s worth at once, then hands out times to come back one admission apart, as a queue', () => {
    const t0 = 1_000_000;
    const a = new Admission(10, t0);
    for (let i = 0; i < 10; i++) expect(a.admit(t0)).toBe(0);
    // At t0 the bucket is empty: the next token comes at +100 ms, then one each 100 ms.
    expect([a.admit(t0), a.admit(t0), a.admit(t0)]).toEqual([100, 200, 300]);
    // 50 ms later: the queue is still there; the next slot follows the last one handed out.
    expect(a.admit(t0 + 50)).toBe(350);
    expect(a.refused).toBe(4);
  });

  it('admits again once the bucket refilled, and a refusal after a quiet while waits only for the next token', () => {
    const t0 = 5_000_000;
    const a = new Admission(10, t0);
    for (let i = 0; i < 10; i++) a.admit(t0);
    expect(a.admit(t0)).toBe(100);
    // Two seconds on, the bucket is full again.
    for (let i = 0; i < 10; i++) expect(a.admit(t0 + 2000)).toBe(0);
    expect(a.admit(t0 + 2000)).toBe(100);
  });

  it('tells a gateway’s devices to spread a reconnect over the time it would take to admit those beyond one second’s worth, past 250 ms, at most a minute', () => {
    const a = new Admission(1000);
    expect(a.reconnectWindowMs(1000)).toBe(0);
    expect(a.reconnectWindowMs(1250)).toBe(0);
    expect(a.reconnectWindowMs(1251)).toBe(251);
    expect(a.reconnectWindowMs(8000)).toBe(7000);
    expect(a.reconnectWindowMs(1_000_000)).toBe(60_000);
    expect(new Admission(0).reconnectWindowMs(8000)).toBe(0);
  });

  it('is off at 0', () => {
    const a = new Admission(0);
    for (let i = 0; i < 1000; i++) expect(a.admit(0)).toBe(0);
    expect(a.refused).toBe(0);
  });

  it('the client package reads the time from the 1013 reason', () => {
    expect(retryAfterOf('server busy; retry after 1250 ms')).toBe(1250);
    expect(retryAfterOf('server busy')).toBeUndefined();
  });
});
