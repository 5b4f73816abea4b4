import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Redis, Cluster } from 'ioredis';
import type { ChangeHandler } from '../calls/change.js';
import type { Logger } from '../util/logger.js';
import type { EventLog } from './eventLog.js';
import { ShardLeases } from './shardLeases.js';
import { ShardReader, type ReaderDeps, type RelayOptions } from './shardReader.js';


/**
 * The outbox relay (docs/architecture.md "Relays"): reads the call shards' outbox streams through a consumer
 * group, writes every change's events into the audience's event logs (which also notifies the
 * gateways) and keeps the users' busy markers in the same script (one call per batch on a single
 * Redis, one per user on a cluster: shardReader.ts deliver), hands the changes to the
 * side-effect handlers (pushes), then acknowledges the entries with a later read (removed in bulk
 * once a second). A batch's delivery rides in the write of the shard's next read (readNew).
 * On a Redis Cluster in-call messages share the outbox (so each sender's stay in order) and are
 * only published on the recipient's live channel, never appended to a log; on a single Redis
 * their own script publishes them (docs/api.md "In-call messages").
 *
 * Relays share the shards by leases (shardLeases.ts): each reads about shards ÷ relays of them,
 * each shard on its own blocking connection (a read never crosses hash slots, so this works on
 * Redis Cluster unchanged). A shard's entries are relayed in outbox order, and all changes of one
 * call live in one shard, so each call's events reach a user's log in order; changes of different
 * calls, from different shards, may interleave differently (devices order by callId + revision).
 *
 * Delivery is at least once, and the event log stores each outbox entry's events once even when
 * an entry is handed over again (lua/appendEvents.lua keeps a per-shard mark). A handler runs at
 * most once per change in one relay: when a batch is retried (a handler or the acknowledgement
 * failed), only the handlers that did not finish run again, so a retry sends no push twice. Only a
 * relay that dies between a side effect and the acknowledgement leaves it to be done again by the
 * relay that takes the shard over.
 */

export class OutboxRelay {
  readonly consumer = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  private readonly leases: ShardLeases;
  private readonly readers = new Map<number, ShardReader>();
  private running = false;
  private leaseLoop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  /** Changes relayed since start (metrics). */
  relayed = 0;

  constructor(
    private readonly redis: Redis | Cluster,
    /** Makes a connection for one shard's blocking reads. */
    private readonly blockingConnection: () => Promise<Redis | Cluster>,
    private readonly eventLog: EventLog,
    private readonly handlers: readonly ChangeHandler[],
    private readonly logger: Logger,
    private readonly opts: RelayOptions,
  ) {
    this.leases = new ShardLeases(redis, opts, this.consumer, {
      acquired: (shard) => this.startReader(shard),
      releasing: (shard) => this.stopReader(shard),
      lost: (shard) => this.stopReader(shard),
    }, logger);
  }

  async start(): Promise<void> {
    this.running = true;
    await this.leases.check();
    this.leaseLoop = this.manageLeases();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.leaseLoop;
    // Finishes every shard's in-flight batches, then hands the shards over at once instead of
    // after the leases run out.
    await this.leases.releaseAll();
  }

  /** Shards currently read by this relay (tests, metrics). */
  shards(): number[] {
    return this.leases.shards();
  }

  private async manageLeases(): Promise<void> {
    while (this.running) {
      await new Promise<void>((r) => {
        this.wake = r;
        setTimeout(r, this.leases.checkEveryMs);
      });
      if (!this.running) return;
      try {
        await this.leases.check();
      } catch (err) {
        this.logger.warn({ err: (err as Error).message }, 'relay lease check failed; retrying');
      }
    }
  }

  private async startReader(shard: number): Promise<void> {
    const reader = new ShardReader(shard, this.readerDeps, this.opts);
    const blocking = await this.blockingConnection();
    try {
      await reader.start(blocking);
    } catch (err) {
      blocking.disconnect();
      throw err;
    }
    this.readers.set(shard, reader);
  }

  private async stopReader(shard: number): Promise<void> {
    const reader = this.readers.get(shard);
    this.readers.delete(shard);
    await reader?.stop();
  }

  private get readerDeps(): ReaderDeps {
    return {
      redis: this.redis,
      eventLog: this.eventLog,
      handlers: this.handlers,
      logger: this.logger,
      consumer: this.consumer,
      countRelayed: (n) => (this.relayed += n),
    };
  }
}
