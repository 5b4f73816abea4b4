import type { Redis, Cluster } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import { runScript } from '../redis/scripts.js';
import type { Logger } from '../util/logger.js';

/**
 * Which outbox shards this relay reads (docs/architecture.md "Relays"). Every relay beats in a shared set of live
 * relays and holds about shards ÷ live relays of the shard leases (lua/holdShardLease.lua): a relay
 * holding more than its share gives the extra shards up (after their in-flight work is done), and
 * one holding fewer takes free shards. A relay that dies stops beating and renewing; after a lease
 * (RELAY_CLAIM_IDLE_MS) its shards are free and the others take them over, with the entries it
 * read but never acknowledged. All changes of one call live in one shard, so one relay at a time
 * relays a call's changes, in order.
 */

export interface LeaseOwner {
  /** A shard was taken: read it (its unacknowledged entries first). */
  acquired(shard: number): Promise<void>;
  /** The shard is about to be given up: stop reading it and finish its in-flight work. */
  releasing(shard: number): Promise<void>;
  /** The lease was lost (not renewed in time, or taken): stop reading at once. */
  lost(shard: number): Promise<void>;
}

export interface LeaseSettings extends KeySpace {
  /** Lease duration: how long a dead relay's shards wait before another relay takes them. */
  leaseMs: number;
}

export class ShardLeases {
  private readonly owned = new Set<number>();
  private lastRelays: string[] = [];

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly s: LeaseSettings,
    readonly holder: string,
    private readonly owner: LeaseOwner,
    private readonly logger: Logger,
  ) {}

  /**
   * How often leases are renewed and rebalanced: well within the lease, and at least every second
   * so a shard another relay gave up is picked up within a second.
   */
  get checkEveryMs(): number {
    return Math.max(1, Math.min(1000, Math.floor(this.s.leaseMs / 3)));
  }

  shards(): number[] {
    return [...this.owned].sort((a, b) => a - b);
  }

  /** Renews, gives up and takes leases so this relay holds its share. */
  async check(): Promise<void> {
    const owned = this.shards();
    // One round trip (auto-pipelined): the heartbeat, who holds each shard, and the renewals. A
    // shard whose primary does not answer (a failover on a cluster) is skipped this time: the
    // others are still renewed and balanced. (`undefined`: unknown.)
    const settle = <T>(p: Promise<T>) => p.catch(() => undefined);
    const [beat, holders, renewed] = await Promise.all([
      settle(runScript(this.redis, 'relayHeartbeat', [keys.relays(this.s)], { relay: this.holder, leaseMs: String(this.s.leaseMs), leaving: '0' }) as Promise<string[]>),
      Promise.all(Array.from({ length: this.s.shards }, (_, shard) => settle(this.redis.get(keys.shardLease(this.s, shard))))),
      Promise.all(owned.map((shard) => settle(this.hold(shard, false)))),
    ]);
    for (const [i, shard] of owned.entries()) {
      // Unknown: keep reading; the lease is renewed next time or runs out (and is then lost).
      if (holders[shard] === undefined || renewed[i] === undefined) continue;
      if (holders[shard] === this.holder && renewed[i] === 1) continue;
      this.owned.delete(shard);
      this.logger.warn({ shard }, 'relay lost its lease on an outbox shard');
      await this.owner.lost(shard);
    }

    // Without an answer, the relays last seen (a relay that missed a beat is not gone yet).
    const relays = beat ?? this.lastRelays;
    this.lastRelays = relays;
    const live = relays.includes(this.holder) ? relays : [...relays, this.holder].sort();
    const share = Math.ceil(this.s.shards / live.length);
    // Over its share (another relay joined): give up the highest shards.
    for (const shard of this.shards().reverse().slice(0, Math.max(0, this.owned.size - share))) {
      await this.owner.releasing(shard);
      await this.hold(shard, true);
      this.owned.delete(shard);
      this.logger.info({ shard, relays: live.length }, 'relay handed an outbox shard over');
    }
    // Under its share: take free shards, each relay starting at its own place in the ring.
    const start = live.indexOf(this.holder) * share;
    for (let k = 0; k < this.s.shards && this.owned.size < share; k++) {
      const shard = (start + k) % this.s.shards;
      if (holders[shard] !== null || this.owned.has(shard)) continue;
      if ((await settle(this.hold(shard, false))) !== 1) continue;
      this.owned.add(shard);
      try {
        await this.owner.acquired(shard);
      } catch (err) {
        // Could not start reading it (its primary is failing over): give it back, take it later.
        this.owned.delete(shard);
        await settle(this.hold(shard, true));
        this.logger.warn({ shard, err: (err as Error).message }, 'relay could not start reading an outbox shard; retrying');
      }
    }
  }

  /** Gives every lease up (shutdown), so other relays need not wait for them to run out. */
  async releaseAll(): Promise<void> {
    for (const shard of this.shards()) await this.owner.releasing(shard);
    await Promise.all([
      ...this.shards().map((shard) => this.hold(shard, true)),
      runScript(this.redis, 'relayHeartbeat', [keys.relays(this.s)], { relay: this.holder, leaseMs: String(this.s.leaseMs), leaving: '1' }),
    ]).catch(() => {});
    this.owned.clear();
  }

  private async hold(shard: number, release: boolean): Promise<number> {
    const reply = await runScript(this.redis, 'holdShardLease', [keys.shardLease(this.s, shard)], { holder: this.holder, leaseMs: String(this.s.leaseMs), release: release ? '1' : '0' });
    return Number(reply);
  }
}
