/**
 * The wait before a reconnect attempt: exponential backoff with full jitter. Attempt n (from 0)
 * waits a uniformly random time between `minMs` and min(`maxMs`, `baseMs` × 2^n), so a gateway
 * crash does not bring every device back in the same instant (docs/devices.md "A gateway crash").
 */
export function backoffDelay(attempt: number, o: { baseMs: number; minMs: number; maxMs: number }, random: () => number = Math.random): number {
  const cap = Math.max(o.minMs, Math.min(o.maxMs, o.baseMs * 2 ** Math.min(attempt, 30)));
  return o.minMs + random() * (cap - o.minMs);
}
