import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import { parseChange, type CallChange } from './change.js';
import { deliveriesFor, type Delivery } from './audience.js';
import type { EventLog } from './eventLog.js';
import type { Logger } from '../util/logger.js';
import { runScript } from '../redis/scripts.js';

/**
 * The outbox relay: reads the call shards' outbox streams through a consumer group, writes every
 * change's events into the audience's event logs (which also notifies the gateways), hands the
 * change to the other handlers (pushes, timers), then acknowledges and deletes the entries.
 *
 * Each shard is read by one relay at a time, under a lease (lua/holdShardLease.lua): a call's
 * changes all live in one shard, so they reach the event logs in the order they happened even
 * with several relays running. Relays share the shards evenly (each aims at ceil(shards / live
 * relays), counted from heartbeats). A relay that dies loses its leases after `leaseMs`; the
 * relay taking a shard over first claims and processes the entries the previous holder read but
 * never acknowledged. Delivery is at least once: a redelivered change produces the same event IDs.
 */

export type ChangeHandler = (changes: readonly CallChange[]) => Promise<void>;

export interface RelayOptions extends KeySpace {
  batchSize: number;
  blockMs: number;
  /** Lease duration: how long a dead relay's shards wait before another relay takes them. */
  leaseMs: number;
}

export const RELAY_GROUP = 'relay';

type Entry = [id: string, fields: string[] | null];

export class OutboxRelay {
  private running = false;
  private loop: Promise<void> | undefined;
  readonly consumer = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  private readonly streamKeys: string[];
  /** Shards this relay holds the lease of. */
  private readonly owned = new Set<number>();
  /** Shards whose entries pending for this consumer must be processed before new ones. */
  private readonly pendingFirst = new Set<number>();
  private lastLeaseCheck = 0;
  /** Changes relayed since start (metrics). */
  relayed = 0;

  constructor(
    private readonly redis: Redis,
    private readonly blocking: Redis,
    private readonly eventLog: EventLog,
    private readonly handlers: readonly ChangeHandler[],
    private readonly logger: Logger,
    private readonly opts: RelayOptions,
  ) {
    this.streamKeys = Array.from({ length: opts.shards }, (_, i) => keys.outboxForShard(opts, i));
  }

  async start(): Promise<void> {
    for (const key of this.streamKeys) {
      try {
        await this.redis.xgroup('CREATE', key, RELAY_GROUP, '0', 'MKSTREAM');
      } catch (err) {
        if (!String((err as Error).message).includes('BUSYGROUP')) throw err;
      }
    }
    this.running = true;
    await this.manageLeases();
    this.loop = this.readLoop();
  }

  async stop(): Promise<void> {
    this.running = false;
    // Unblock the pending XREADGROUP. A batch being processed finishes first (the loop awaits it).
    this.blocking.disconnect();
    await this.loop?.catch(() => {});
    // Hand the shards over at once instead of after the lease runs out.
    await Promise.all(
      [...this.owned].map((shard) =>
        runScript(this.redis, 'holdShardLease', [keys.shardLease(this.opts, shard)], [this.consumer, String(this.opts.leaseMs), '1']),
      ),
    ).catch(() => {});
    await this.redis.hdel(keys.relays(this.opts), this.consumer).catch(() => {});
    this.owned.clear();
  }

  /** Shards currently held (tests, metrics). */
  shards(): number[] {
    return [...this.owned].sort((a, b) => a - b);
  }

  private async readLoop(): Promise<void> {
    while (this.running) {
      try {
        if (Date.now() - this.lastLeaseCheck >= this.leaseCheckMs()) await this.manageLeases();
        if (this.pendingFirst.size > 0) {
          await this.processPending();
          continue;
        }
        if (this.owned.size === 0) {
          await sleep(this.leaseCheckMs());
          continue;
        }
        const shards = this.shards();
        const reply = (await this.blocking.xreadgroup(
          'GROUP', RELAY_GROUP, this.consumer,
          'COUNT', this.opts.batchSize,
          // Wake up in time to renew the leases.
          'BLOCK', Math.max(1, Math.min(this.opts.blockMs, this.leaseCheckMs())),
          'STREAMS', ...shards.map((i) => this.streamKeys[i]!), ...shards.map(() => '>'),
        )) as [string, Entry[]][] | null;
        for (const [key, entries] of reply ?? []) await this.processOrRetry(key, entries);
      } catch (err) {
        if (!this.running) return;
        this.logger.warn({ err: (err as Error).message }, 'relay read failed; retrying');
        await sleep(500);
      }
    }
  }

  /**
   * How often leases are renewed and rebalanced: well within the lease, and at least every
   * second so a shard another relay gave up is picked up within a second.
   */
  private leaseCheckMs(): number {
    return Math.max(1, Math.min(1000, Math.floor(this.opts.leaseMs / 3)));
  }

  /** Processes a batch; on failure its entries stay pending and are retried before newer ones. */
  private async processOrRetry(key: string, entries: Entry[]): Promise<void> {
    try {
      await this.processEntries(key, entries);
    } catch (err) {
      this.pendingFirst.add(this.streamKeys.indexOf(key));
      this.logger.error({ err, stream: key }, 'relay failed to process a batch; retrying');
      await sleep(200);
    }
  }

  /** Entries pending for this consumer (claimed, or failed before): oldest first. */
  private async processPending(): Promise<void> {
    for (const shard of [...this.pendingFirst].sort((a, b) => a - b)) {
      const key = this.streamKeys[shard]!;
      const reply = (await this.redis.xreadgroup(
        'GROUP', RELAY_GROUP, this.consumer, 'COUNT', this.opts.batchSize, 'STREAMS', key, '0',
      )) as [string, Entry[]][] | null;
      const entries = reply?.[0]?.[1] ?? [];
      if (entries.length === 0) this.pendingFirst.delete(shard);
      else await this.processOrRetry(key, entries);
    }
  }

  /** Renews held leases, releases extras and takes free shards, aiming at an even share. */
  private async manageLeases(): Promise<void> {
    const now = Date.now();
    this.lastLeaseCheck = now;
    const relaysKey = keys.relays(this.opts);
    await this.redis.hset(relaysKey, this.consumer, String(now));
    const beats = await this.redis.hgetall(relaysKey);
    let live = 0;
    for (const [consumer, beat] of Object.entries(beats)) {
      if (Number(beat) >= now - 3 * this.opts.leaseMs) live++;
      else await this.redis.hdel(relaysKey, consumer);
    }
    const target = Math.ceil(this.opts.shards / Math.max(1, live));
    const lease = (shard: number, release: boolean) =>
      runScript(this.redis, 'holdShardLease', [keys.shardLease(this.opts, shard)], [this.consumer, String(this.opts.leaseMs), release ? '1' : '0']);

    for (const shard of this.shards()) {
      if ((await lease(shard, false)) !== 1) {
        this.owned.delete(shard);
        this.pendingFirst.delete(shard);
        this.logger.warn({ shard }, 'relay lost its lease on an outbox shard');
      }
    }
    // Between batches, so nothing of a released shard is in flight here.
    for (const shard of this.shards().reverse()) {
      if (this.owned.size <= target) break;
      await lease(shard, true);
      this.owned.delete(shard);
      this.pendingFirst.delete(shard);
    }
    for (let shard = 0; shard < this.opts.shards && this.owned.size < target; shard++) {
      if (this.owned.has(shard) || (await lease(shard, false)) !== 1) continue;
      this.owned.add(shard);
      await this.takeOver(shard);
    }
  }

  /** Claims every entry of the shard still pending for another consumer (its relay died). */
  private async takeOver(shard: number): Promise<void> {
    const key = this.streamKeys[shard]!;
    let cursor = '0-0';
    let claimed = 0;
    do {
      const [next, ids] = (await this.redis.xautoclaim(key, RELAY_GROUP, this.consumer, 0, cursor, 'COUNT', 1000, 'JUSTID')) as [
        string,
        string[],
      ];
      claimed += ids.length;
      cursor = next;
    } while (cursor !== '0-0');
    // Process what is pending (for this consumer now) before anything new.
    this.pendingFirst.add(shard);
    if (claimed > 0) this.logger.warn({ shard, claimed }, 'relay took over unacknowledged outbox entries');
  }

  private async processEntries(key: string, entries: Entry[]): Promise<void> {
    const shard = this.streamKeys.indexOf(key);
    const changes: CallChange[] = [];
    const ids: string[] = [];
    for (const [id, fields] of entries) {
      ids.push(id);
      // Deleted while pending (already relayed by a relay that died before acknowledging).
      if (!fields) continue;
      try {
        changes.push(parseChange(id, shard, fields));
      } catch (err) {
        // A malformed entry can never be processed; keep it out of the way, visibly.
        this.logger.error({ err: (err as Error).message, stream: key, id }, 'dropping malformed outbox entry');
      }
    }
    await this.deliver(changes);
    for (const handle of this.handlers) await handle(changes);
    await this.redis.multi().xack(key, RELAY_GROUP, ...ids).xdel(key, ...ids).exec();
    this.relayed += changes.length;
  }

  /** Appends every change's deliveries, one script call per user, in outbox order. */
  private async deliver(changes: readonly CallChange[]): Promise<void> {
    const byUser = new Map<string, Delivery[]>();
    for (const change of changes) {
      for (const d of deliveriesFor(change)) {
        const list = byUser.get(d.userId);
        if (list) list.push(d);
        else byUser.set(d.userId, [d]);
      }
    }
    if (byUser.size === 0) return;
    const pipeline = this.redis.pipeline();
    for (const [userId, list] of byUser) this.eventLog.appendTo(pipeline, userId, list);
    const results = (await pipeline.exec()) ?? [];
    const failed = results.find(([err]) => err);
    if (failed) throw failed[0];
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
