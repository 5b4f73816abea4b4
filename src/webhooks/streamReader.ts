import type { RedisClient } from '../redis/connection.js';
import { OutboxAcks } from '../events/outboxAcks.js';
import type { Logger } from '../util/logger.js';
import type { WebhookDelivery } from './queue.js';

/**
 * One queue partition's webhook stream, read by this worker (docs/webhooks.md "Delivery"): the
 * relay's webhook handler adds the deliveries of its batches as one entry (src/webhooks/publisher.ts),
 * and each worker process reads the entries through one consumer group, attempts them at once, and
 * acknowledges an entry once its failures are queued as BullMQ retry jobs. An entry costs Redis
 * its add, its read and a share of an acknowledgement and a trim: a few commands, where a BullMQ
 * job per entry cost 44 (docs/performance.md "Command budget").
 *
 * At least once: an entry is acknowledged only after its deliveries were answered or queued for a
 * retry. A reader renews its claim on the entries it is still sending every CHECK_EVERY_MS; an
 * entry unacknowledged and unrenewed for CLAIM_IDLE_MS (its reader died, or its run failed) is
 * taken over by whichever reader checks next, and sent again with the same webhook-ids.
 */

export const WEBHOOK_GROUP = 'deliver';

/** How long an entry's reader may go without renewing its claim before another takes it over. */
const CLAIM_IDLE_MS = 10_000;
/** How often a reader renews its claims and looks for entries to take over. */
const CHECK_EVERY_MS = 5_000;
/** A consumer (a worker process) idle this long with nothing pending is gone: it leaves the group. */
const FORGET_AFTER_MS = 3_600_000;
/** A read's wait for new entries: a stop waits at most this long for the read to end. */
const BLOCK_MS = 1000;

type Entry = [id: string, fields: string[] | null];

/** Sends one entry's deliveries (src/webhooks/deliverer.ts deliver, first attempts). */
export type DeliverEntry = (entryId: string, deliveries: readonly WebhookDelivery[]) => Promise<void>;

export class WebhookStreamReader {
  private running = false;
  private loop: Promise<void> | undefined;
  private blocking: RedisClient | undefined;
  private checker: NodeJS.Timeout | undefined;
  /** Entries being sent, and since when (for the renewal of their claim). */
  private readonly inFlight = new Map<string, { since: number; done: Promise<void> }>();
  /** Wakes the read loop once an entry is done and there is room for more. */
  private room: (() => void) | undefined;
  private readonly acks: OutboxAcks;

  constructor(
    private readonly redis: RedisClient,
    private readonly key: string,
    private readonly consumer: string,
    /** Entries sent at once (WEBHOOK_CONCURRENCY). */
    private readonly concurrency: number,
    private readonly deliver: DeliverEntry,
    private readonly logger: Logger,
    /** How long a consumer goes unseen before it counts as gone (tests shorten it). */
    private readonly forgetAfterMs = FORGET_AFTER_MS,
  ) {
    this.acks = new OutboxAcks(redis, key, () => {}, (err) => logger.warn({ err: (err as Error).message, stream: key }, 'webhook stream acknowledgement failed; retrying'), WEBHOOK_GROUP);
  }

  async start(blocking: RedisClient): Promise<void> {
    this.blocking = blocking;
    try {
      // On the reader's own connection: XGROUP names its key where ioredis does not see it, and
      // an auto-pipelined command to the wrong primary of a cluster fails instead of following.
      await blocking.xgroup('CREATE', this.key, WEBHOOK_GROUP, '0', 'MKSTREAM');
    } catch (err) {
      if (!String((err as Error).message).includes('BUSYGROUP')) throw err;
    }
    await this.forgetGoneConsumers(blocking);
    this.running = true;
    this.loop = this.readLoop();
    let checking = false;
    this.checker = setInterval(() => {
      if (checking) return;
      checking = true;
      this.check()
        .catch((err: unknown) => this.logger.warn({ err: (err as Error).message, stream: this.key }, 'webhook stream check failed; retrying'))
        .finally(() => (checking = false));
    }, CHECK_EVERY_MS);
  }

  /**
   * Each worker process is a consumer of its own name: those of processes gone for forgetAfterMs
   * with nothing pending leave the group, so restarts do not grow it. (On the reader's own
   * connection: ioredis sees no key in XINFO.)
   */
  private async forgetGoneConsumers(blocking: RedisClient): Promise<void> {
    const consumers = (await blocking.xinfo('CONSUMERS', this.key, WEBHOOK_GROUP)) as unknown[][];
    for (const flat of consumers) {
      const c = new Map(Array.from({ length: flat.length / 2 }, (_, i) => [String(flat[2 * i]), flat[2 * i + 1]]));
      if (Number(c.get('pending')) === 0 && Number(c.get('idle')) > this.forgetAfterMs) {
        await blocking.xgroup('DELCONSUMER', this.key, WEBHOOK_GROUP, String(c.get('name')));
      }
    }
  }

  /** Stops reading; the entries being sent finish and are acknowledged. */
  async stop(): Promise<void> {
    this.running = false;
    clearInterval(this.checker);
    this.room?.();
    this.blocking?.disconnect();
    await Promise.race([this.loop?.catch(() => {}), sleep(BLOCK_MS + 1000)]);
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight.values()].map((f) => f.done));
    await this.acks.flush().catch(() => {});
    if (this.acks.untrimmed) await this.acks.trim().catch(() => {});
  }

  /** Reads new entries while there is room; the acknowledgements due ride in the same write. */
  private async readLoop(): Promise<void> {
    while (this.running) {
      if (this.inFlight.size >= this.concurrency) {
        await new Promise<void>((r) => (this.room = r));
        this.room = undefined;
        continue;
      }
      const ids = this.acks.due() ? this.acks.take() : [];
      try {
        const p = this.blocking!.pipeline();
        if (ids.length > 0) p.xack(this.key, WEBHOOK_GROUP, ...ids);
        p.xreadgroup('GROUP', WEBHOOK_GROUP, this.consumer, 'COUNT', this.concurrency - this.inFlight.size, 'BLOCK', BLOCK_MS, 'STREAMS', this.key, '>');
        let results: [Error | null, unknown][];
        try {
          results = (await p.exec())!;
        } catch (err) {
          this.acks.putBack(ids);
          throw err;
        }
        const [ackError] = ids.length > 0 ? results[0]! : [null];
        if (ackError) this.acks.putBack(ids);
        else if (ids.length > 0) this.acks.acked(ids);
        const [readError, reply] = results[results.length - 1]!;
        if (readError) throw readError;
        const entries = (reply as [string, Entry[]][] | null)?.[0]?.[1] ?? [];
        for (const entry of entries) this.send(entry);
        // Remove what was acknowledged: at most once a second, and when idle.
        if (this.acks.trimDue(entries.length === 0)) await this.acks.trim();
      } catch (err) {
        if (!this.running) return;
        // A read that failed may have been served: its entries are taken over once idle (check).
        this.logger.warn({ err: (err as Error).message, stream: this.key }, 'webhook stream read failed; retrying');
        await sleep(500);
      }
    }
  }

  /** Sends one entry's deliveries; acknowledges it once they are done, else leaves it to be taken over. */
  private send([id, fields]: Entry): void {
    if (this.inFlight.has(id)) return;
    const done = this.sendEntry(id, fields)
      .then(
        () => this.acks.add([id]),
        (err: unknown) => this.logger.error({ err, stream: this.key, id }, 'webhook deliveries failed; another attempt once the entry is taken over'),
      )
      .finally(() => {
        this.inFlight.delete(id);
        this.room?.();
      });
    this.inFlight.set(id, { since: Date.now(), done });
  }

  private async sendEntry(id: string, fields: string[] | null): Promise<void> {
    // Trimmed while pending: acknowledged by a reader that took it over.
    if (!fields) return;
    let deliveries: WebhookDelivery[];
    try {
      deliveries = JSON.parse(fields[1] ?? '') as WebhookDelivery[];
      if (fields[0] !== 'd' || !Array.isArray(deliveries)) throw new Error('not a list of deliveries');
    } catch (err) {
      // A malformed entry can never be sent; keep it out of the way, visibly.
      this.logger.error({ err: (err as Error).message, stream: this.key, id }, 'dropping malformed webhook stream entry');
      return;
    }
    await this.deliver(id, deliveries);
  }

  /**
   * Renews the claim on the entries still being sent (an XCLAIM resets their idle time), then
   * takes over entries nobody renewed for CLAIM_IDLE_MS, while there is room.
   */
  private async check(): Promise<void> {
    const now = Date.now();
    const sending = [...this.inFlight].filter(([, f]) => now - f.since >= CHECK_EVERY_MS / 2).map(([id]) => id);
    if (sending.length > 0) await this.redis.xclaim(this.key, WEBHOOK_GROUP, this.consumer, 0, ...sending, 'JUSTID');
    const room = this.concurrency - this.inFlight.size;
    if (!this.running || room <= 0) return;
    const [, entries] = (await this.redis.xautoclaim(this.key, WEBHOOK_GROUP, this.consumer, CLAIM_IDLE_MS, '0-0', 'COUNT', room)) as [string, Entry[]];
    if (entries.length > 0) this.logger.warn({ stream: this.key, entries: entries.length }, 'webhook stream entries taken over from a reader that stopped renewing them');
    for (const entry of entries) if (this.running) this.send(entry);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
