import { createHash } from 'node:crypto';

/**
 * Which instance holds a call's room (docs/operations.md "SFU media"): rendezvous hashing, the
 * instance whose SHA-256 of `<instance URL>\n<callId>` is highest. Every process computes the
 * same answer from the callId and the configured list alone, without any shared state, and a room
 * stays where it is for its life as long as the list does. Adding an instance moves only the calls
 * it now wins (about 1/n); removing one moves only its own.
 */
export function placeRoom<T extends { url: string }>(callId: string, instances: readonly T[]): T {
  let best: T | undefined;
  let bestScore = -1n;
  for (const instance of instances) {
    const score = createHash('sha256').update(`${instance.url}\n${callId}`).digest().readBigUInt64BE(0);
    if (score > bestScore) {
      best = instance;
      bestScore = score;
    }
  }
  if (!best) throw new Error('placeRoom: no SFU instance configured');
  return best;
}
