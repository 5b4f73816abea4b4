import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import { parseChange, type CallChange } from './change.js';
import { deliveriesFor, type Delivery } from './audience.js';
import type { EventLog } from './eventLog.js';
import type { Logger } from '../util/logger.js';
import { runScript } from '../redis/scripts.js';
import { compareStreamIds } from './cursor.js';

/**
 * The outbox relay: reads the call shards' outbox streams through a consumer group, writes every
 * change's events into the audience's event logs (which also notifies the gateways), hands the
 * change to the other handlers (pushes, timers), then acknowledges and deletes the entries.
 *
 * Each shard is read by one relay at a time, under a lease (lua/holdShardLease.lua), and one
 * relay holds them all while it lives; the others stand by. Each read merges the shards' entries
 * in stream-ID (Redis time) order, so every user's event log follows the order in which the
 * changes happened, across calls too. (Sharing shards between relays would scale the relay but
 * lose that order; Redis saturates long before one relay does.) A relay that dies loses its
 * leases after `leaseMs`; the standby that takes a shard over first claims and processes the
 * entries the dead one read but never acknowledged. If two relays ever hold shards at once, the
 * one holding fewer gives them up. Delivery is at least once: a redelivered change produces the
 * same event IDs.
 */

/**
 * A side effect of a batch of changes, run after the batch's events were delivered. `prefetch`,
 * if any, is called as the delivery starts, to send the reads the handler will need in the same
 * write as the event-log appends (its result must come back through the handler itself).
 */
export type ChangeHandler = ((changes: readonly CallChange[]) => Promise<void>) & {
  prefetch?: (changes: readonly CallChange[]) => void;
};

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
  /**
   * Side effects (pushes, timers, busy markers) and acknowledgements of the batches whose events
   * were already delivered, oldest first. The read loop goes on delivering the next batches'
   * events meanwhile, so devices do not wait behind BullMQ. Each handler runs the batches one
   * after another, in outbox order, but independently of the other handlers (pushes do not wait
   * for timer removals); a batch is acknowledged once all of its handlers are done.
   */
  private readonly effects = new Set<Promise<void>>();
  private readonly handlerTails: Promise<unknown>[];
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
    this.handlerTails = handlers.map(() => Promise.resolve());
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
    await this.settleEffects();
    // Hand the shards over at once instead of after the lease runs out.
    await Promise.all(
      [...this.owned].map((shard) =>
        runScript(this.redis, 'holdShardLease', [keys.shardLease(this.opts, shard)], [this.consumer, String(this.opts.leaseMs), '1']),
      ),
    ).catch(() => {});
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
          // Pending entries include those whose effects are still running: let them finish.
          await this.settleEffects();
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
        if (reply) await this.processOrRetry(reply);
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

  /** Processes a read; on failure its entries stay pending and are retried before newer ones. */
  private async processOrRetry(streams: [string, Entry[]][]): Promise<void> {
    const failed = async (err: unknown) => {
      for (const [key] of streams) this.pendingFirst.add(this.streamKeys.indexOf(key));
      this.logger.error({ err }, 'relay failed to process a batch; retrying');
      await sleep(200);
    };
    let changes: CallChange[];
    try {
      changes = this.parseEntries(streams);
      for (const handler of this.handlers) handler.prefetch?.(changes);
      // Events first: devices are waiting on them.
      await this.deliver(changes);
    } catch (err) {
      await failed(err);
      return;
    }
    const runs = this.handlers.map((handle, i) => {
      const run = this.handlerTails[i]!.then(() => handle(changes));
      // A failed batch is retried as a whole later; it does not hold this handler's next batches.
      this.handlerTails[i] = run.catch(() => {});
      return run;
    });
    const done: Promise<void> = Promise.all(runs)
      .then(() => this.acknowledge(streams, changes))
      .catch(failed)
      .finally(() => this.effects.delete(done));
    this.effects.add(done);
    // Bounded: at most a few batches' effects in flight behind the events.
    if (this.effects.size > MAX_BATCHES_IN_EFFECTS) await this.effects.values().next().value;
  }

  /** Waits until the effects of every delivered batch are done (or failed and marked pending). */
  private async settleEffects(): Promise<void> {
    while (this.effects.size > 0) await Promise.all(this.effects);
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
      else await this.processOrRetry([[key, entries]]);
    }
  }

  /**
   * Renews this relay's leases and takes the free shards while no other relay holds any; gives
   * all of its shards up when another relay holds more (ties: the smaller name keeps them).
   */
  private async manageLeases(): Promise<void> {
    this.lastLeaseCheck = Date.now();
    const lease = (shard: number, release: boolean) =>
      runScript(this.redis, 'holdShardLease', [keys.shardLease(this.opts, shard)], [this.consumer, String(this.opts.leaseMs), release ? '1' : '0']);
    // One round trip (auto-pipelined): who holds each shard, and the renewal of this relay's.
    const owned = this.shards();
    const [holders, renewed] = await Promise.all([
      Promise.all(Array.from({ length: this.opts.shards }, (_, shard) => this.redis.get(keys.shardLease(this.opts, shard)))),
      Promise.all(owned.map((shard) => lease(shard, false))),
    ]);

    owned.forEach((shard, i) => {
      if (holders[shard] !== this.consumer || renewed[i] !== 1) {
        this.owned.delete(shard);
        this.pendingFirst.delete(shard);
        this.logger.warn({ shard }, 'relay lost its lease on an outbox shard');
      }
    });
    const others = new Map<string, number>();
    for (const h of holders) if (h && h !== this.consumer) others.set(h, (others.get(h) ?? 0) + 1);
    if (this.owned.size > 0) {
      for (const [other, count] of others) {
        if (count > this.owned.size || (count === this.owned.size && other < this.consumer)) {
          // Nothing of these shards may be in flight when they are handed over.
          await this.settleEffects();
          await Promise.all(this.shards().map((shard) => lease(shard, true)));
          this.owned.clear();
          this.pendingFirst.clear();
          this.logger.info({ other }, 'relay stands by: another relay holds the outbox shards');
          return;
        }
      }
    } else if (others.size > 0) {
      return; // another relay is active: stand by
    }
    for (let shard = 0; shard < this.opts.shards; shard++) {
      if (holders[shard] !== null || this.owned.has(shard) || (await lease(shard, false)) !== 1) continue;
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

  /** The changes of one read, merged across shards in stream-ID order (the Redis time of each). */
  private parseEntries(streams: [string, Entry[]][]): CallChange[] {
    const merged: { key: string; shard: number; id: string; fields: string[] | null }[] = [];
    for (const [key, entries] of streams) {
      const shard = this.streamKeys.indexOf(key);
      for (const [id, fields] of entries) merged.push({ key, shard, id, fields });
    }
    merged.sort((a, b) => compareStreamIds(a.id, b.id) || a.shard - b.shard);
    const changes: CallChange[] = [];
    for (const { key, shard, id, fields } of merged) {
      // Deleted while pending (already relayed by a relay that died before acknowledging).
      if (!fields) continue;
      try {
        changes.push(parseChange(id, shard, fields));
      } catch (err) {
        // A malformed entry can never be processed; keep it out of the way, visibly.
        this.logger.error({ err: (err as Error).message, stream: key, id }, 'dropping malformed outbox entry');
      }
    }
    return changes;
  }

  /** Acknowledges and deletes a batch whose events and side effects are done. */
  private async acknowledge(streams: [string, Entry[]][], changes: readonly CallChange[]): Promise<void> {
    // Plain commands, not MULTI (both are idempotent): they share the auto-pipelined write of
    // whatever else this turn sends.
    const acks: Promise<unknown>[] = [];
    for (const [key, entries] of streams) {
      const ids = entries.map(([id]) => id);
      acks.push(this.redis.xack(key, RELAY_GROUP, ...ids), this.redis.xdel(key, ...ids));
    }
    await Promise.all(acks);
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
    await Promise.all([...byUser].map(([userId, list]) => this.eventLog.append(userId, list)));
  }
}

/** How many delivered batches may wait for their side effects before reading stops. */
const MAX_BATCHES_IN_EFFECTS = 4;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
