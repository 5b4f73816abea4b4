import type { Redis } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import type { ChangeHandler } from '../events/relay.js';

/**
 * Relay handler keeping each user's active-call marker (busy detection): set for both parties
 * when a call is answered, cleared when that call ends. The marker expires with the call's
 * retention, so a missed clear cannot keep a user busy for ever.
 */
export function activeCallIndexer(redis: Redis, ks: KeySpace, retentionMs: number): ChangeHandler {
  return async (changes) => {
    const p = redis.pipeline();
    let n = 0;
    for (const { kind, call } of changes) {
      const parties = [call.callerUserId, call.calleeUserId];
      if (kind === 'answered') {
        for (const u of parties) p.set(keys.activeCall(ks, u), call.callId, 'PX', retentionMs);
        n += 2;
      } else if (kind === 'ended' && call.acceptedAtMs !== undefined) {
        for (const u of parties) (p as unknown as Record<string, (...a: string[]) => void>).clearActiveCall!(keys.activeCall(ks, u), call.callId);
        n += 2;
      }
    }
    if (n === 0) return;
    const results = (await p.exec()) ?? [];
    const failed = results.find(([err]) => err);
    if (failed) throw failed[0];
  };
}
