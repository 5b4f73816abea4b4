import type { Redis } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import type { ChangeHandler } from '../events/change.js';
import { runScript } from '../redis/scripts.js';

/**
 * Relay handler keeping each user's active-call marker (busy detection): set for both parties
 * when a call is answered, cleared when that call ends. The marker expires with the call's
 * retention, so a missed clear cannot keep a user busy for ever.
 */
export function activeCallIndexer(redis: Redis, ks: KeySpace, retentionMs: number): ChangeHandler {
  return { name: 'busy-markers', handle: async (changes) => {
    // Issued in one turn: the client's auto-pipeline sends them in one write.
    const writes: Promise<unknown>[] = [];
    for (const { kind, call } of changes) {
      const parties = [call.callerUserId, call.calleeUserId];
      if (kind === 'answered') {
        for (const u of parties) writes.push(redis.set(keys.activeCall(ks, u), call.callId, 'PX', retentionMs));
      } else if (kind === 'ended' && call.acceptedAtMs !== undefined) {
        for (const u of parties) writes.push(runScript(redis, 'clearActiveCall', [keys.activeCall(ks, u)], [call.callId]));
      }
    }
    await Promise.all(writes);
  } };
}
