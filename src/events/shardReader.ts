import type { Span } from '@opentelemetry/api';
import { openSpan, SpanKind, tracingEnabled } from '../observability/tracing.js';
import type { Redis, Cluster, ChainableCommander } from 'ioredis';
import { keys } from '../redis/keys.js';
import { historyRetentionOf, type HistorySettings } from '../history/callHistory.js';
import { parseChange, parseMessageEntry, type BatchReads, type CallChange, type ChangeHandler, type MessageEntry } from '../calls/change.js';
import { registrationsIn, userReplies, type EventLog } from './eventLog.js';
import { appendCallsOf, userAppendsOf } from './batchAppends.js';
import type { Logger } from '../util/logger.js';
import { OutboxAcks, RELAY_GROUP } from './outboxAcks.js';
import { pipelineScript, runScript, type ScriptArgs, type ScriptName } from '../redis/scripts.js';
import { readStoredCall } from '../calls/storedCall.js';

import { topologyOf, type Topology } from '../redis/connection.js';

/**
 * One outbox shard's reader, while its relay holds the shard's lease (relay.ts; docs/architecture.md
 * "Relays"): it reads the shard's entries through the consumer group, delivers each batch's events
 * to the audience's logs, runs the side-effect handlers in outbox order, then acknowledges the
 * entries with a later read and removes them in bulk.
 */

export interface RelayOptions extends HistorySettings {
  batchSize: number;
  /** After a read that returned entries, how long to wait before the next read (RELAY_GATHER_MS). */
  gatherMs: number;
  blockMs: number;
  /** Lease duration: how long a dead relay's shards wait before another relay takes them. */
  leaseMs: number;
}

/**
 * How many delivered batches of one shard may wait for their side effects before reading stops:
 * memory stays bounded when a side effect cannot keep up, yet events do not wait on one slow push,
 * nor on the webhook deliveries' gathering into a job (src/webhooks/publisher.ts COALESCE_MS).
 */
const MAX_BATCHES_IN_EFFECTS = 128;

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

/** What a shard reader works with: its relay's connections, log, handlers and identity. */
export interface ReaderDeps {
  redis: Redis | Cluster;
  eventLog: EventLog;
  handlers: readonly ChangeHandler[];
  logger: Logger;
  /** The relay's consumer name in the shards' consumer group. */
  consumer: string;
  /** Counts relayed changes (metrics). */
  countRelayed(n: number): void;
}

/** Reads and relays one outbox shard while this relay holds its lease. */
export class ShardReader {
  private running = false;
  private loop: Promise<void> | undefined;
  private blocking: Redis | Cluster | undefined;
  /** On a single Redis a batch's appends share the write of the next read (deliver). */
  private topology: Topology = 'cluster';
  private readonly key: string;
  /** Entries pending for this consumer (taken over, or failed) are processed before new ones. */
  private pendingFirst = true;
  /** Batches whose events are delivered and whose side effects and acknowledgement are running. */
  private readonly effects = new Set<Promise<void>>();
  /** Per handler: the tail of its chain (batches run in outbox order, unless it is concurrent). */
  private readonly tails: Promise<unknown>[];
  private readonly acks: OutboxAcks;
  /** Per handler: entries it has done that are not acknowledged yet (skipped when retried). */
  private readonly done: Set<string>[];

  constructor(
    private readonly shard: number,
    private readonly deps: ReaderDeps,
    private readonly opts: RelayOptions,
  ) {
    this.key = keys.outboxForShard(opts, shard);
    this.tails = deps.handlers.map(() => Promise.resolve());
    this.done = deps.handlers.map(() => new Set());
    this.acks = new OutboxAcks(deps.redis, this.key, (ids) => {
      for (const set of this.done) for (const id of ids) set.delete(id);
      deps.countRelayed(ids.length);
    }, (err) => deps.logger.warn({ err: (err as Error).message, shard }, 'relay acknowledgement failed; retrying'));
  }

  async start(blocking: Redis | Cluster): Promise<void> {
    const { redis, consumer } = this.deps;
    this.blocking = blocking;
    this.topology = topologyOf(blocking);
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
    if (claimed > 0) this.deps.logger.warn({ shard: this.shard, claimed }, 'relay took over unacknowledged outbox entries');
    // Everything the group delivered is acknowledged or pending: remove what the previous reader
    // acknowledged but did not get to remove.
    const groups = (await redis.xinfo('GROUPS', this.key)) as unknown[][];
    const group = groups.map((g) => fieldsOf(g)).find((g) => g.name === RELAY_GROUP);
    if (group?.['last-delivered-id']) this.acks.trimThrough(String(group['last-delivered-id']));
    await this.acks.trim();
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
    await this.acks.flush().catch(() => {});
    if (this.acks.untrimmed) await this.acks.trim().catch(() => {});
  }

  private async readLoop(): Promise<void> {
    const { redis, consumer, logger } = this.deps;
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
          await this.acks.flush();
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
        if (this.acks.trimDue(!read?.length)) await this.acks.trim();
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
    const { handlers } = this.deps;
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
    const { handlers, logger } = this.deps;
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
        return this.acks.add(batch.entries.map(([id]) => id));
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
        this.deps.logger.error({ err: (err as Error).message, stream: this.key, id }, 'dropping malformed outbox entry');
      }
    }
    return { changes, messages };
  }

  /**
   * Delivers a batch: appends its events to the audience's logs (appendEvents.lua, in outbox
   * order: one call for the batch's users on a single Redis, one per user on a cluster; it also
   * keeps the busy markers, files the calls that started or ended in each user's call index
   * (active calls and call history) and returns the push registrations asked for), publishes
   * its in-call messages on their recipients' live channels (never logged: a retried batch publishes them again with the same eventId, docs/api.md
   * "In-call messages"), and reads the calls its handlers name.
   *
   * With `next` (the pipeline of the shard's next read) the call reads share that write, as they
   * live in the outbox's hash slot, and on a single Redis so does everything else. Otherwise the
   * commands go on the command connection, whose auto-pipeline sends them in one write.
   */
  private deliver(b: Batch, next?: ChainableCommander): Promise<BatchReads> {
    const { redis, eventLog } = this.deps;
    const all = next && this.topology === 'single' ? next : undefined;
    const script = <N extends ScriptName>(name: N, k: string[], args: ScriptArgs<N>): Promise<unknown> =>
      all ? new Promise((resolve, reject) => pipelineScript(all, name, k, args, (err, r) => (err ? reject(err) : resolve(r)))) : runScript(redis, name, k, args);
    const readCall = (callId: string) => readStoredCall(redis, keys.call(this.opts, callId), next);

    const retentionMs = historyRetentionOf(this.opts);
    // On a single Redis every gateway follows the shard's early channel: the batch's log copies go
    // there in one publication (src/events/logNotice.ts), not one per entry on each user's channel.
    const noticeChannel = this.topology === 'single' ? keys.earlyChannel(this.opts, this.shard) : '';
    const appended = Promise.all(
      appendCallsOf(userAppendsOf(b.changes, this.shard, b.withPush), this.topology).map(async (part) => {
        const c = eventLog.appendUsersCall(part, retentionMs, noticeChannel);
        const replies = userReplies(await script('appendEvents', c.keys, c.args));
        return part.map((u, i) => [u.userId, registrationsIn(replies[i])] as const);
      }),
    ).then((parts) => parts.flat());
    const messagesTo = new Map<string, string[]>();
    for (const m of b.messages) {
      let args = messagesTo.get(m.toUserId);
      if (!args) messagesTo.set(m.toUserId, (args = []));
      args.push(m.only, m.event);
    }
    const published = Promise.all([...messagesTo].map(([userId, args]) => script('publishMessages', [keys.liveChannel(eventLog.settings, userId)], { messages: args })));
    const calls = Promise.all([...b.callIds].map(async (id) => [id, await readCall(id)] as const));
    // Failures are seen through the combined promise; the parts need not report them again.
    for (const part of [appended, published, calls]) part.catch(() => {});
    return Promise.all([appended, published, calls]).then(([stored, , read]) => ({
      pushRegistrations: new Map(stored.filter(([userId]) => b.withPush.has(userId))),
      calls: new Map(read),
    }));
  }

  /**
   * Delivers `batch` (what the last read returned) and reads what is new. Without a gathering
   * pause the batch's delivery and the next read share one write. With one (RELAY_GATHER_MS), the
   * batch is delivered at once and the next read waits: the changes made meanwhile come back as
   * one batch, sharing its read, append call, log notice and acknowledgement, where each would
   * have been a batch of its own. A change made while the shard is idle is read at once.
   */
  private async readNew(batch?: Batch): Promise<Entry[] | undefined> {
    if (!batch || this.opts.gatherMs === 0) return this.deliverAndRead(batch, true);
    await this.deliverAndRead(batch, false);
    await sleep(this.opts.gatherMs);
    return this.running ? this.deliverAndRead(undefined, true) : undefined;
  }

  /**
   * One write: the acknowledgements of the batches done since the last read, the delivery of
   * `batch` (deliver) and, with `read`, the next blocking read of new entries, whose entries it
   * returns. On a single Redis a relayed change costs the relay this one write, on a cluster one
   * more for its events' append.
   */
  private async deliverAndRead(batch: Batch | undefined, read: boolean): Promise<Entry[] | undefined> {
    const { consumer } = this.deps;
    const ids = this.acks.due() ? this.acks.take() : [];
    const p = this.blocking!.pipeline();
    const delivered = batch && this.deliver(batch, p);
    if (ids.length > 0) p.xack(this.key, RELAY_GROUP, ...ids);
    if (read) p.xreadgroup('GROUP', RELAY_GROUP, consumer, 'COUNT', this.opts.batchSize, 'BLOCK', this.opts.blockMs, 'STREAMS', this.key, '>');
    const executed = p.exec();
    executed.catch(() => {});
    // The batch's replies come first: its side effects start while the read blocks.
    if (batch) await this.relayBatch(batch, delivered!);
    let results: [Error | null, unknown][] | null;
    try {
      results = await executed;
    } catch (err) {
      this.acks.putBack(ids);
      throw err;
    }
    const [ackError] = ids.length > 0 ? results![results!.length - (read ? 2 : 1)]! : [null];
    if (ackError) this.acks.putBack(ids);
    else if (ids.length > 0) this.acks.acked(ids);
    if (!read) return undefined;
    const [readError, reply] = results![results!.length - 1]!;
    if (readError) throw readError;
    // A batch failed meanwhile: what this read returned is pending, read again after it.
    if (this.pendingFirst) return undefined;
    return (reply as [string, Entry[]][] | null)?.[0]?.[1];
  }
}

/** A flat [field, value, ...] reply as an object. */
function fieldsOf(flat: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = flat[i + 1];
  return out;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
