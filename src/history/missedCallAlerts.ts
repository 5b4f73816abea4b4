import type { Redis, Cluster } from 'ioredis';
import { keys } from '../redis/keys.js';
import { DEFAULT_HISTORY_RETENTION_MS } from '../calls/retention.js';

/** The history's key space and retention (src/history/callHistory.ts HistorySettings). */
interface Settings {
  prefix: string;
  shards: number;
  historyRetentionMs?: number;
}

/**
 * Whether a missed-call alert went out for a missed call (docs/call-history.md "Missed calls"):
 * the record says `missedCallAlert`. A record is filed by the relay in the script that appends the
 * user's events, before the pushes of its change are even planned, and records are members of
 * sorted sets (their JSON): rewriting one would let a batch handed over again file the old one a
 * second time. So the alerts are kept beside the records, a sorted set of the user's alerted
 * callIds by when the call was missed, trimmed to the history's retention at each write, and the
 * reader splices the flag into the missed records of a page (one ZMSCORE a page).
 *
 * Written when a provider accepts an alert (src/push/dispatcher.ts): three commands in one round
 * trip per accepted alert, only ever for a missed call.
 */
export class MissedCallAlertIndex {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly settings: Settings,
  ) {}

  /** Notes that an alert for `callId`, which `userId` missed at `missedAtMs`, was accepted by a provider. */
  async noteSent(userId: string, callId: string, missedAtMs: number): Promise<void> {
    const key = keys.userAlertedCalls(this.settings, userId);
    const retentionMs = this.settings.historyRetentionMs ?? DEFAULT_HISTORY_RETENTION_MS;
    await Promise.all([
      this.redis.zadd(key, missedAtMs, callId),
      this.redis.zremrangebyscore(key, '-inf', `(${missedAtMs - retentionMs}`),
      this.redis.pexpire(key, retentionMs),
    ]);
  }

  /**
   * The page's records with `missedCallAlert` in each missed one (true when an alert was accepted
   * for it, else false); the others as they are.
   */
  async withAlertFlags(userId: string, records: readonly string[]): Promise<string[]> {
    const missed = records.map((r) => (r.includes('"missed":true') ? (JSON.parse(r) as { callId: string; missed: boolean }) : undefined));
    const callIds = missed.flatMap((m) => (m?.missed ? [m.callId] : []));
    if (callIds.length === 0) return [...records];
    const scores = (await this.redis.call('ZMSCORE', keys.userAlertedCalls(this.settings, userId), ...callIds)) as (string | null)[];
    const sent = new Set(callIds.filter((_, i) => scores[i] !== null));
    // A record is an object's JSON text: the flag goes before its closing brace.
    return records.map((r, i) => (missed[i]?.missed ? `${r.slice(0, -1)},"missedCallAlert":${sent.has(missed[i].callId)}}` : r));
  }
}
