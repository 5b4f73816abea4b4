import { describe, expect, it } from 'vitest';
import { backoffDelay } from '../../packages/client/src/backoff.js';

/** The client package's reconnect wait (docs/devices.md "A gateway crash"): exponential, capped, full jitter. */
describe('backoffDelay', () => {
  const o = { baseMs: 250, minMs: 0, maxMs: 10_000 };

  it('the longest wait doubles per attempt up to maxMs', () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((n) => backoffDelay(n, o, () => 1))).toEqual([250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000]);
    expect(backoffDelay(1000, o, () => 1)).toBe(10_000);
  });

  it('full jitter: anywhere from minMs to that cap, uniformly', () => {
    expect(backoffDelay(3, o, () => 0)).toBe(0);
    expect(backoffDelay(3, o, () => 0.5)).toBe(1000);
    expect(backoffDelay(3, { ...o, minMs: 50 }, () => 0)).toBe(50);
    expect(backoffDelay(0, { baseMs: 250, minMs: 50, maxMs: 60 }, () => 1)).toBe(60);
    // A floor above the cap wins.
    expect(backoffDelay(0, { baseMs: 250, minMs: 500, maxMs: 100 }, () => 0.7)).toBe(500);
  });
});
