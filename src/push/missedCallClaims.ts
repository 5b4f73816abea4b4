import type { Redis, Cluster } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import type { PushMessage } from './queues.js';

/**
 * Exactly one missed-call alert per installation (docs/protocol.md "Missed-call alerts"). The relay
 * delivers a change at least once: a batch handed over again after a relay died, or a push handler
 * that failed and runs again, plans the same alerts again. Each alert is claimed with one `SET NX`
 * in its user's slot before its first attempt; an alert already claimed is not sent. Retries of a
 * claimed alert (BullMQ jobs) are not claimed again.
 *
 * A claim lives an hour: a change is relayed again within the relay's claim time
 * (`RELAY_CLAIM_IDLE_MS`, seconds), never a day later, and a day of claims would cost a key per
 * missed call and installation for a day. A worker that dies between the claim and the send loses
 * that alert: an alert is a convenience, the call is in the history either way.
 */
const CLAIM_TTL_MS = 3_600_000;

export function missedCallClaims(redis: Redis | Cluster, ks: KeySpace): (msgs: readonly Extract<PushMessage, { t: 'missed' }>[]) => Promise<boolean[]> {
  return (msgs) =>
    Promise.all(
      // One command each, auto-pipelined: the keys live in their users' slots.
      msgs.map(async (m) => (await redis.set(keys.missedCallAlertClaim(ks, m.userId, m.callId, m.installationId, m.kind), '1', 'PX', CLAIM_TTL_MS, 'NX')) === 'OK'),
    );
}
