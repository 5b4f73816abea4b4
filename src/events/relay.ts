import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import { parseChange, type CallChange } from './change.js';
import { deliveriesFor, type Delivery } from './audience.js';
import type { EventLog } from './eventLog.js';
import type { Logger } from '../util/logger.js';

/**
 * The outbox relay: reads the call shards' outbox streams through a consumer group, writes every
 * change's events into the audience's event logs (which also notifies the gateways), hands the
 * change to the other handlers (pushes, timers), then acknowledges and deletes the entries.
 * Entries a crashed relay read but never acknowledged are claimed after `claimIdleMs`.
 * Delivery is at least once: a redelivered change produces the same event IDs.
 */

export type ChangeHandler = (changes: readonly CallChange[]) => Promise<void>;

export interface RelayOptions extends KeySpace {
  batchSize: number;
  blockMs: number;
  claimIdleMs: number;
  claimIntervalMs: number;
}

export const RELAY_GROUP = 'relay';

export class OutboxRelay {
  private running = false;
  private loop: Promise<void> | undefined;
  private claimTimer: NodeJS.Timeout | undefined;
  readonly consumer = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  private readonly streamKeys: string[];
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
    this.loop = this.readLoop();
    this.claimTimer = setInterval(() => void this.claimAbandoned(), this.opts.claimIntervalMs);
  }

  async stop(): Promise<void> {
    this.running = false;
    if (this.claimTimer) clearInterval(this.claimTimer);
    // Unblock the pending XREADGROUP; entries it read but did not process stay pending and are
    // claimed by another relay (or this one after a restart).
    this.blocking.disconnect();
    await this.loop?.catch(() => {});
  }

  private async readLoop(): Promise<void> {
    const ids = this.streamKeys.map(() => '>');
    while (this.running) {
      let reply: [string, [string, string[]][]][] | null;
      try {
        reply = (await this.blocking.xreadgroup(
          'GROUP', RELAY_GROUP, this.consumer,
          'COUNT', this.opts.batchSize,
          'BLOCK', this.opts.blockMs,
          'STREAMS', ...this.streamKeys, ...ids,
        )) as [string, [string, string[]][]][] | null;
      } catch (err) {
        if (!this.running) return;
        this.logger.warn({ err: (err as Error).message }, 'relay read failed; retrying');
        await sleep(500);
        continue;
      }
      if (!reply) continue;
      for (const [key, entries] of reply) {
        await this.processEntries(key, entries).catch((err: unknown) => {
          // Not acknowledged: the entries stay pending and are claimed again later.
          this.logger.error({ err, stream: key }, 'relay failed to process a batch');
        });
      }
    }
  }

  /** Claims entries another consumer read but did not acknowledge within claimIdleMs. */
  async claimAbandoned(): Promise<number> {
    let claimed = 0;
    for (const key of this.streamKeys) {
      try {
        const [, entries] = (await this.redis.xautoclaim(
          key, RELAY_GROUP, this.consumer, this.opts.claimIdleMs, '0-0', 'COUNT', this.opts.batchSize,
        )) as [string, [string, string[] | null][]];
        // Entries deleted meanwhile come back as null: acknowledge them away.
        const live = entries.filter((e): e is [string, string[]] => Array.isArray(e[1]));
        const gone = entries.filter((e) => !Array.isArray(e[1])).map((e) => e[0]);
        if (gone.length) await this.redis.xack(key, RELAY_GROUP, ...gone);
        if (live.length) {
          claimed += live.length;
          this.logger.warn({ stream: key, count: live.length }, 'relay claimed abandoned outbox entries');
          await this.processEntries(key, live);
        }
      } catch (err) {
        if (this.running) this.logger.error({ err, stream: key }, 'relay claim failed');
      }
    }
    return claimed;
  }

  private async processEntries(key: string, entries: [string, string[]][]): Promise<void> {
    const shard = this.streamKeys.indexOf(key);
    const changes: CallChange[] = [];
    const ids: string[] = [];
    for (const [id, fields] of entries) {
      ids.push(id);
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
