import type { Redis, Cluster } from 'ioredis';
import { compareStreamIds } from './cursor.js';

export const RELAY_GROUP = 'relay';

/** How often a shard's acknowledged entries are removed from its outbox. */
const TRIM_EVERY_MS = 1000;

/**
 * Acknowledgements ride with the shard's next read, in the same write, once the oldest has waited
 * ACK_RIDE_AFTER_MS (or ACK_RIDE_COUNT are waiting): a busy shard then acknowledges several
 * batches with one XACK instead of one per read. When no read comes for ACK_DELAY_MS (an idle
 * shard) they go out on their own. A later acknowledgement only widens, by as much, the window in
 * which a relay that dies leaves side effects to be done again (docs/architecture.md "Relays").
 */
const ACK_RIDE_AFTER_MS = 20;
const ACK_RIDE_COUNT = 64;
const ACK_DELAY_MS = 50;

/**
 * One shard's acknowledgements and removals (docs/architecture.md "Relays"): entries whose side
 * effects are done wait to ride with the shard's next read (or go on their own when the shard is
 * idle), and acknowledged entries leave the outbox in bulk, at most once a second.
 */
export class OutboxAcks {
  /** Entries whose side effects are done, to be acknowledged with a later read; since when. */
  private unacked: string[] = [];
  private unackedSince = 0;
  private timer: NodeJS.Timeout | undefined;
  /** The newest entry acknowledged, and when acknowledged entries were last removed. */
  private highestAcked = '0-0';
  private trimmedAt = 0;
  /** Entries were acknowledged since the last trim. */
  untrimmed = false;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly key: string,
    /** Entries acknowledged (by a read's XACK or a flush). */
    private readonly onAcked: (ids: readonly string[]) => void,
    /** A flush on its own (an idle shard) failed: it is tried again with the next read or flush. */
    private readonly onFlushError: (err: unknown) => void,
    /** The consumer group (the webhook stream has its own, src/webhooks/streamReader.ts). */
    private readonly group = RELAY_GROUP,
  ) {}

  /** Notes entries whose events and side effects are done. */
  add(ids: readonly string[]): void {
    if (this.unacked.length === 0) this.unackedSince = Date.now();
    this.unacked.push(...ids);
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      this.flush().catch(this.onFlushError);
    }, ACK_DELAY_MS);
  }

  /** Whether the waiting acknowledgements ride with the next read (ACK_RIDE_AFTER_MS). */
  due(): boolean {
    return this.unacked.length >= ACK_RIDE_COUNT || (this.unacked.length > 0 && Date.now() - this.unackedSince >= ACK_RIDE_AFTER_MS);
  }

  /** The waiting acknowledgements, for a read to carry; give them back (putBack) if it fails. */
  take(): string[] {
    clearTimeout(this.timer);
    this.timer = undefined;
    const ids = this.unacked;
    this.unacked = [];
    return ids;
  }

  /** Kept for the next read or flush; acknowledged entries stay pending meanwhile, never lost. */
  putBack(ids: readonly string[]): void {
    this.unacked.unshift(...ids);
  }

  /** Acknowledges on the command connection what waits for a read (an idle shard, a stop). */
  async flush(): Promise<void> {
    const ids = this.take();
    if (ids.length === 0) return;
    try {
      await this.redis.xack(this.key, this.group, ...ids);
    } catch (err) {
      this.putBack(ids);
      throw err;
    }
    this.acked(ids);
  }

  acked(ids: readonly string[]): void {
    for (const id of ids) this.trimThrough(id);
    this.untrimmed = true;
    this.onAcked(ids);
  }

  /** Marks everything up to `id` as acknowledged (a shard taken over: its group's last delivered entry). */
  trimThrough(id: string): void {
    if (compareStreamIds(id, this.highestAcked) > 0) this.highestAcked = id;
  }

  /** Whether to remove acknowledged entries now: at most once a second, and when idle. */
  trimDue(idle: boolean): boolean {
    return this.untrimmed && (idle || Date.now() - this.trimmedAt >= TRIM_EVERY_MS);
  }

  /**
   * Removes the acknowledged entries: everything older than both the oldest entry still pending
   * (for any consumer: a relay that died may have left some) and the newest acknowledged. An entry
   * read later than that is newer, and stays.
   */
  async trim(): Promise<void> {
    this.trimmedAt = Date.now();
    this.untrimmed = false;
    const [count, oldestPending] = (await this.redis.xpending(this.key, this.group)) as [number, string | null];
    // MINID keeps its own ID: the oldest pending entry stays, the newest acknowledged goes.
    const keepFrom = count > 0 && oldestPending && compareStreamIds(oldestPending, this.highestAcked) <= 0 ? oldestPending : nextStreamId(this.highestAcked);
    if (this.highestAcked !== '0-0') await this.redis.xtrim(this.key, 'MINID', keepFrom);
  }
}

/** The smallest stream ID after `id`. */
function nextStreamId(id: string): string {
  const [ms, seq] = id.split('-');
  return `${ms}-${Number(seq ?? 0) + 1}`;
}

