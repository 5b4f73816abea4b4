import type { Span } from '@opentelemetry/api';
import { openSpan, SpanKind, tracingEnabled } from '../observability/tracing.js';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Redis, Cluster, ChainableCommander } from 'ioredis';
import { keys } from '../redis/keys.js';
import { indexOpsOf, userIndexOps, type HistorySettings, type IndexOps } from '../history/callHistory.js';
import { parseChange, parseMessageEntry, type BatchReads, type CallChange, type ChangeHandler, type MessageEntry } from '../calls/change.js';
import { deliveriesFor } from './audience.js';
import { registrationsIn, type EventLog, type RelayedDelivery } from './eventLog.js';
import type { Logger } from '../util/logger.js';
import { ShardLeases } from './shardLeases.js';
import { compareStreamIds } from './cursor.js';
import { busyMarkerOps, type MarkerOp } from '../calls/activeCalls.js';
import { pipelineScript, runScript, type ScriptName } from '../redis/scripts.js';
import { callFromHash } from '../calls/model.js';

/**
 * The outbox relay (docs/architecture.md "Relays"): reads the call shards' outbox streams through a consumer
 * group, writes every change's events into the audience's event logs (which also notifies the
 * gateways) and keeps the users' busy markers in the same scripts, hands the changes to the
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

export interface RelayOptions extends HistorySettings {
  batchSize: number;
  blockMs: number;
  /** Lease duration: how long a dead relay's shards wait before another relay takes them. */
  leaseMs: number;
}

export const RELAY_GROUP = 'relay';

/** How often a shard's acknowledged entries are removed from its outbox. */
const TRIM_EVERY_MS = 1000;

/**
 * How many delivered batches of one shard may wait for their side effects before reading stops:
 * memory stays bounded when a side effect cannot keep up, yet events do not wait on one slow push,
 * nor on the webhook deliveries' gathering into a job (src/webhooks/publisher.ts COALESCE_MS).
 */
const MAX_BATCHES_IN_EFFECTS = 128;

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

type Entry = [id: string, fields: string[] | null];

/** A read's entries, parsed, with what each handler still has to do of them and what they read. */
interface Batch {
  entries: Entry[];
  changes: CallChange[];
  messages: MessageEntry[];
  /** Per handler: its changes of this batch not yet done (all of them, unless this is a retry). */
  todo: CallChange[][];
  /** Users whose push registrations, and calls whose records, the handlers read. */
  withPush: Set<string>;
  callIds: Set<string>;
  spans: Span[] | undefined;
}

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
    const reader = new ShardReader(shard, this, this.opts);
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

  /** @internal for ShardReader */
  get deps() {
    return { redis: this.redis, eventLog: this.eventLog, handlers: this.handlers, logger: this.logger, consumer: this.consumer };
  }

  /** @internal for ShardReader */
  countRelayed(n: number): void {
    this.relayed += n;
  }
}

/** Reads and relays one outbox shard while this relay holds its lease. */
class ShardReader {
  private running = false;
  private loop: Promise<void> | undefined;
  private blocking: Redis | Cluster | undefined;
  /** On a single Redis a batch's appends share the write of the next read (deliver). */
  private singleNode = false;
  private readonly key: string;
  /** Entries pending for this consumer (taken over, or failed) are processed before new ones. */
  private pendingFirst = true;
  /** Batches whose events are delivered and whose side effects and acknowledgement are running. */
  private readonly effects = new Set<Promise<void>>();
  /** Per handler: the tail of its chain (batches run in outbox order, unless it is concurrent). */
  private readonly tails: Promise<unknown>[];
  /** The newest entry this reader acknowledged, and when acknowledged entries were last removed. */
  private highestAcked = '0-0';
  /** Entries whose side effects are done, to be acknowledged with a later read; since when. */
  private unacked: string[] = [];
  private unackedSince = 0;
  private ackTimer: NodeJS.Timeout | undefined;
  /** Entries were acknowledged since the last trim. */
  private untrimmed = false;
  private trimmedAt = 0;
  /** Per handler: entries it has done that are not acknowledged yet (skipped when retried). */
  private readonly done: Set<string>[];

  constructor(
    private readonly shard: number,
    private readonly relay: OutboxRelay,
    private readonly opts: RelayOptions,
  ) {
    this.key = keys.outboxForShard(opts, shard);
    this.tails = relay.deps.handlers.map(() => Promise.resolve());
    this.done = relay.deps.handlers.map(() => new Set());
  }

  async start(blocking: Redis | Cluster): Promise<void> {
    const { redis, consumer } = this.relay.deps;
    this.blocking = blocking;
    this.singleNode = !(blocking as Cluster).isCluster;
    try {
      await redis.xgroup('CREATE', this.key, RELAY_GROUP, '0', 'MKSTREAM');
    } catch (err) {
      if (!String((err as Error).message).includes('BUSYGROUP')) throw err;
    }
    // Entries another relay read but never acknowledged (it died or gave the shard up) become
    // this relay's, to be processed before anything new.
    let cursor = '0-0';
    let claimed = 0;
    do {
      const [next, ids] = (await redis.xautoclaim(this.key, RELAY_GROUP, consumer, 0, cursor, 'COUNT', 1000, 'JUSTID')) as [string, string[]];
      claimed += ids.length;
      cursor = next;
    } while (cursor !== '0-0');
    if (claimed > 0) this.relay.deps.logger.warn({ shard: this.shard, claimed }, 'relay took over unacknowledged outbox entries');
    // Everything the group delivered is acknowledged or pending: remove what the previous reader
    // acknowledged but did not get to remove.
    const groups = (await redis.xinfo('GROUPS', this.key)) as unknown[][];
    const group = groups.map((g) => fieldsOf(g)).find((g) => g.name === RELAY_GROUP);
    if (group?.['last-delivered-id']) this.highestAcked = String(group['last-delivered-id']);
    await this.trim();
    this.running = true;
    this.loop = this.readLoop();
  }

  async stop(): Promise<void> {
    this.running = false;
    // Unblock the pending XREADGROUP. A batch being processed finishes first (the loop awaits it).
    this.blocking?.disconnect();
    // A read on a connection to a primary that just died may never settle: the loop ends on its
    // own once it does (running is false), and nothing of this shard is in flight meanwhile.
    await Promise.race([this.loop?.catch(() => {}), sleep(this.opts.blockMs + 1000)]);
    await this.settle();
    // Hand the shard over clean: what this reader relayed is acknowledged and leaves the outbox now.
    await this.flushAcks().catch(() => {});
    if (this.untrimmed) await this.trim().catch(() => {});
  }

  private async readLoop(): Promise<void> {
    const { redis, consumer, logger } = this.relay.deps;
    /** Entries the last read returned: relayed in the same write as the next read. */
    let read: Entry[] | undefined;
    while (this.running) {
      try {
        if (this.pendingFirst) {
          // What the last read returned is pending too: it is read again below, in order.
          read = undefined;
          // Pending entries include those whose effects are still running or done but not yet
          // acknowledged: let them finish and acknowledge them first.
          await this.settle();
          await this.flushAcks();
          const reply = (await redis.xreadgroup('GROUP', RELAY_GROUP, consumer, 'COUNT', this.opts.batchSize, 'STREAMS', this.key, '0')) as
            | [string, Entry[]][]
            | null;
          const entries = reply?.[0]?.[1] ?? [];
          if (entries.length === 0) this.pendingFirst = false;
          else {
            const batch = this.batchOf(entries);
            await this.relayBatch(batch, this.deliver(batch));
          }
          continue;
        }
        read = await this.readNew(read?.length ? this.batchOf(read) : undefined);
        // Remove what was acknowledged: at most once a second, and when idle.
        if (this.untrimmed && (!read?.length || Date.now() - this.trimmedAt >= TRIM_EVERY_MS)) await this.trim();
      } catch (err) {
        read = undefined;
        if (!this.running) return;
        // A read that failed may have been served (its entries now pending for this consumer):
        // read the pending entries again before anything new.
        this.pendingFirst = true;
        logger.warn({ err: (err as Error).message, shard: this.shard }, 'relay read failed; retrying');
        await sleep(500);
      }
    }
    // Entries read just before a stop are still relayed, on the command connection (the shard's
    // own is closed); if that fails they stay pending for the relay that takes the shard.
    if (read?.length) {
      const batch = this.batchOf(read);
      await this.relayBatch(batch, this.deliver(batch));
    }
  }

  /** Parses a read's entries, with what each handler still has to do of them and what they read. */
  private batchOf(entries: Entry[]): Batch {
    const { handlers } = this.relay.deps;
    const { changes, messages } = this.parse(entries);
    const todo = handlers.map((_, i) => changes.filter((c) => !this.done[i]!.has(c.entryId)));
    const withPush = new Set<string>();
    const callIds = new Set<string>();
    handlers.forEach((h, i) => {
      if (todo[i]!.length === 0) return;
      for (const u of h.pushRegistrationsOf?.(todo[i]!) ?? []) withPush.add(u);
      for (const id of h.callsOf?.(todo[i]!) ?? []) callIds.add(id);
    });
    return { entries, changes, messages, todo, withPush, callIds, spans: tracingEnabled() ? this.traceChanges(changes) : undefined };
  }

  /**
   * Once a batch is delivered, runs its side effects and then its acknowledgement behind the
   * reads. A batch that failed is read again (pending first): only the handlers that did not
   * finish run again.
   */
  private async relayBatch(batch: Batch, delivered: Promise<BatchReads>): Promise<void> {
    const { handlers, logger } = this.relay.deps;
    const failed = async (err: unknown) => {
      this.pendingFirst = true;
      logger.error({ err, shard: this.shard }, 'relay failed to process a batch; retrying');
      await sleep(200);
    };
    const endSpans = () => {
      for (const span of batch.spans ?? []) span.end();
    };
    let reads: BatchReads;
    try {
      reads = await delivered;
    } catch (err) {
      endSpans();
      await failed(err);
      return;
    }
    const { todo } = batch;
    const runs = handlers.map((h, i) => {
      const run = (h.concurrent ? Promise.resolve() : this.tails[i]!).then(async () => {
        if (todo[i]!.length === 0) return;
        await h.handle(todo[i]!, reads);
        for (const c of todo[i]!) this.done[i]!.add(c.entryId);
      });
      // A failed batch is retried later; it does not hold this handler's next batches.
      if (!h.concurrent) this.tails[i] = run.catch(() => {});
      return run;
    });
    // Every handler settles before a failure is handled: a batch read again while another
    // handler is still sending would find that handler's changes not yet done, and redo them.
    const done: Promise<void> = Promise.allSettled(runs)
      .then((results) => {
        const rejected = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
        if (rejected) throw rejected.reason;
        return this.acknowledge(batch.entries);
      })
      .catch(failed)
      .finally(() => {
        this.effects.delete(done);
        endSpans();
      });
    this.effects.add(done);
    if (this.effects.size > MAX_BATCHES_IN_EFFECTS) await this.effects.values().next().value;
  }

  /** Waits until the effects of every delivered batch are done (or failed and marked pending). */
  private async settle(): Promise<void> {
    while (this.effects.size > 0) await Promise.all(this.effects);
  }

  /**
   * One span per traced change, a child of the request's Lua change, ended once the batch's side
   * effects are done; the change then carries this span's context on to its pushes.
   */
  private traceChanges(changes: CallChange[]): Span[] {
    const spans: Span[] = [];
    for (const c of changes) {
      if (!c.traceparent) continue;
      const opened = openSpan(`relay ${c.kind}`, {
        kind: SpanKind.CONSUMER,
        parent: c.traceparent,
        attributes: { 'calling.call_id': c.call.callId, 'calling.shard': c.shard, 'calling.revision': Number(c.call.revision) },
      });
      if (!opened) continue;
      spans.push(opened.span);
      c.traceparent = opened.traceparent;
    }
    return spans;
  }

  private parse(entries: Entry[]): { changes: CallChange[]; messages: MessageEntry[] } {
    const changes: CallChange[] = [];
    const messages: MessageEntry[] = [];
    for (const [id, fields] of entries) {
      // Deleted while pending (already relayed by a relay that died before acknowledging).
      if (!fields) continue;
      try {
        const message = parseMessageEntry(id, fields);
        if (message) messages.push(message);
        else changes.push(parseChange(id, this.shard, fields));
      } catch (err) {
        // A malformed entry can never be processed; keep it out of the way, visibly.
        this.relay.deps.logger.error({ err: (err as Error).message, stream: this.key, id }, 'dropping malformed outbox entry');
      }
    }
    return { changes, messages };
  }

  /**
   * Delivers a batch: appends its events to the audience's logs (one appendEvents.lua call per
   * user, in outbox order, which also keeps the busy markers, files the calls that started or
   * ended in the user's call index (active calls and call history) and returns the push
   * registrations asked for), publishes its in-call messages on their recipients' live channels
   * (never logged: a retried batch publishes them again with the same eventId, docs/api.md
   * "In-call messages"), and reads the calls its handlers name.
   *
   * With `next` (the pipeline of the shard's next read) the call reads share that write, as they
   * live in the outbox's hash slot, and on a single Redis so does everything else. Otherwise the
   * commands go on the command connection, whose auto-pipeline sends them in one write.
   */
  private deliver(b: Batch, next?: ChainableCommander): Promise<BatchReads> {
    const { redis, eventLog } = this.relay.deps;
    const all = next && this.singleNode ? next : undefined;
    const script = (name: ScriptName, k: string[], args: string[]): Promise<unknown> =>
      all ? new Promise((resolve, reject) => pipelineScript(all, name, k, args, (err, r) => (err ? reject(err) : resolve(r)))) : runScript(redis, name, k, args);
    const readCall = (callId: string): Promise<Record<string, string>> => {
      const key = keys.call(this.opts, callId);
      return next ? new Promise((resolve, reject) => next.hgetall(key, (err, r) => (err ? reject(err) : resolve(r!)))) : redis.hgetall(key);
    };

    const byUser = new Map<string, { deliveries: RelayedDelivery[]; marker?: MarkerOp; index: IndexOps }>();
    const of = (userId: string) => {
      let u = byUser.get(userId);
      if (!u) byUser.set(userId, (u = { deliveries: [], index: [] }));
      return u;
    };
    for (const change of b.changes) {
      for (const delivery of deliveriesFor(change)) of(delivery.userId).deliveries.push({ entryId: change.entryId, delivery });
      for (const [userId, marker] of busyMarkerOps(change)) of(userId).marker = marker;
      // Each party's active calls and call history (docs/call-history.md), in the same script.
      indexOpsOf(change, (userId, op) => of(userId).index.push(op));
    }
    for (const userId of b.withPush) of(userId);
    const appended = Promise.all(
      [...byUser].map(async ([userId, u]) => {
        const c = eventLog.appendCall(userId, this.shard, u.deliveries, u.marker, b.withPush.has(userId), userIndexOps(this.opts, u.index));
        return [userId, registrationsIn(await script('appendEvents', c.keys, c.args))] as const;
      }),
    );
    const messagesTo = new Map<string, string[]>();
    for (const m of b.messages) {
      let args = messagesTo.get(m.toUserId);
      if (!args) messagesTo.set(m.toUserId, (args = []));
      args.push(m.only, m.event);
    }
    const published = Promise.all([...messagesTo].map(([userId, args]) => script('publishMessages', [keys.liveChannel(eventLog.settings, userId)], args)));
    const calls = Promise.all([...b.callIds].map(async (id) => [id, callFromHash(await readCall(id))] as const));
    // Failures are seen through the combined promise; the parts need not report them again.
    for (const part of [appended, published, calls]) part.catch(() => {});
    return Promise.all([appended, published, calls]).then(([stored, , read]) => ({
      pushRegistrations: new Map(stored.filter(([userId]) => b.withPush.has(userId))),
      calls: new Map(read),
    }));
  }

  /**
   * Reads the next new entries (blocking). The same write carries the acknowledgements of the
   * batches done since the last read and the delivery of `batch`, what the last read returned
   * (deliver): on a single Redis a relayed change costs the relay this one write, on a cluster
   * one more for its events' append.
   */
  private async readNew(batch?: Batch): Promise<Entry[] | undefined> {
    const { consumer } = this.relay.deps;
    const ids = this.acksDue() ? this.takeAcks() : [];
    const p = this.blocking!.pipeline();
    const delivered = batch && this.deliver(batch, p);
    if (ids.length > 0) p.xack(this.key, RELAY_GROUP, ...ids);
    p.xreadgroup('GROUP', RELAY_GROUP, consumer, 'COUNT', this.opts.batchSize, 'BLOCK', this.opts.blockMs, 'STREAMS', this.key, '>');
    const executed = p.exec();
    executed.catch(() => {});
    // The batch's replies come first: its side effects start while the read blocks.
    if (batch) await this.relayBatch(batch, delivered!);
    let results: [Error | null, unknown][] | null;
    try {
      results = await executed;
    } catch (err) {
      this.unacked.unshift(...ids);
      throw err;
    }
    const [ackError] = ids.length > 0 ? results![results!.length - 2]! : [null];
    if (ackError) this.unacked.unshift(...ids);
    else if (ids.length > 0) this.acked(ids);
    const [readError, reply] = results![results!.length - 1]!;
    if (readError) throw readError;
    // A batch failed meanwhile: what this read returned is pending, read again after it.
    if (this.pendingFirst) return undefined;
    return (reply as [string, Entry[]][] | null)?.[0]?.[1];
  }

  /**
   * Notes a batch whose events and side effects are done, to be acknowledged with the next read.
   * Acknowledged entries are removed in bulk, at most once a second (trim).
   */
  private acknowledge(entries: Entry[]): void {
    if (this.unacked.length === 0) this.unackedSince = Date.now();
    for (const [id] of entries) this.unacked.push(id);
    this.ackTimer ??= setTimeout(() => {
      this.ackTimer = undefined;
      this.flushAcks().catch((err: unknown) => this.relay.deps.logger.warn({ err: (err as Error).message, shard: this.shard }, 'relay acknowledgement failed; retrying'));
    }, ACK_DELAY_MS);
  }

  /** Whether the waiting acknowledgements ride with the next read (ACK_RIDE_AFTER_MS). */
  private acksDue(): boolean {
    return this.unacked.length >= ACK_RIDE_COUNT || (this.unacked.length > 0 && Date.now() - this.unackedSince >= ACK_RIDE_AFTER_MS);
  }

  private takeAcks(): string[] {
    clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    const ids = this.unacked;
    this.unacked = [];
    return ids;
  }

  /** Acknowledges on the command connection what waits for a read (an idle shard, a stop). */
  private async flushAcks(): Promise<void> {
    const ids = this.takeAcks();
    if (ids.length === 0) return;
    try {
      await this.relay.deps.redis.xack(this.key, RELAY_GROUP, ...ids);
    } catch (err) {
      // Kept for the next read or flush; acknowledged entries stay pending meanwhile, never lost.
      this.unacked.unshift(...ids);
      throw err;
    }
    this.acked(ids);
  }

  private acked(ids: readonly string[]): void {
    for (const set of this.done) for (const id of ids) set.delete(id);
    for (const id of ids) if (compareStreamIds(id, this.highestAcked) > 0) this.highestAcked = id;
    this.untrimmed = true;
    this.relay.countRelayed(ids.length);
  }

  /**
   * Removes the acknowledged entries: everything older than both the oldest entry still pending
   * (for any consumer: a relay that died may have left some) and the newest this reader
   * acknowledged. An entry read later than that is newer, and stays.
   */
  private async trim(): Promise<void> {
    this.trimmedAt = Date.now();
    this.untrimmed = false;
    const { redis } = this.relay.deps;
    const [count, oldestPending] = (await redis.xpending(this.key, RELAY_GROUP)) as [number, string | null];
    // MINID keeps its own ID: the oldest pending entry stays, the newest acknowledged goes.
    const keepFrom = count > 0 && oldestPending && compareStreamIds(oldestPending, this.highestAcked) <= 0 ? oldestPending : nextStreamId(this.highestAcked);
    if (this.highestAcked !== '0-0') await redis.xtrim(this.key, 'MINID', keepFrom);
  }
}

/** A flat [field, value, ...] reply as an object. */
function fieldsOf(flat: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = flat[i + 1];
  return out;
}

/** The smallest stream ID after `id`. */
function nextStreamId(id: string): string {
  const [ms, seq] = id.split('-');
  return `${ms}-${Number(seq ?? 0) + 1}`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
