import type { Redis, Cluster } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import { runScript } from '../redis/scripts.js';
import { readIndexedPage, type IndexCursor, type RecordPage } from '../redis/indexedRecords.js';
import type { Queue } from 'bullmq';
import type { WebhookDelivery, WebhookJob } from './queue.js';

/**
 * Deliveries that exhausted their retry schedule (docs/webhooks.md "Dead letters"): kept, at most
 * WEBHOOK_DEAD_LETTERS_MAX, for the server API to read and replay.
 */
export interface DeadLetter extends WebhookDelivery {
  /** Its id in the dead-letter record: the webhook-id (one dead letter per event and endpoint). */
  id: string;
  attempts: number;
  /** The last attempt's HTTP status (null: no answer, see `lastError`). */
  lastStatus: number | null;
  lastError: string | null;
  failedAtMs: number;
}

export class DeadLetters {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly ks: KeySpace,
    private readonly maxKept: number,
  ) {}

  async add(letters: readonly DeadLetter[]): Promise<void> {
    if (letters.length === 0) return;
    await runScript(this.redis, 'addDeadLetters', [keys.webhookDeadLetters(this.ks), keys.webhookDeadLetterOrder(this.ks)], {
      maxKept: String(this.maxKept),
      // The id first: the order's members are read and trimmed by it (lua/readIndexedRecords.lua).
      letters: letters.flatMap(({ id, ...rest }) => [id, JSON.stringify({ id, ...rest })]),
    });
  }

  /** Newest first. */
  list(opts: { cursor?: IndexCursor | undefined; limit: number }): Promise<RecordPage> {
    return readIndexedPage(this.redis, keys.webhookDeadLetterOrder(this.ks), { ...opts, minMs: 0 });
  }

  async get(id: string): Promise<DeadLetter | undefined> {
    const json = await this.redis.hget(keys.webhookDeadLetters(this.ks), id);
    return json ? (JSON.parse(json) as DeadLetter) : undefined;
  }

  /** Removes one (once replayed); true when it was there. */
  async remove(id: string): Promise<boolean> {
    const json = await this.redis.hget(keys.webhookDeadLetters(this.ks), id);
    if (!json) return false;
    const [removed] = await Promise.all([this.redis.hdel(keys.webhookDeadLetters(this.ks), id), this.redis.zrem(keys.webhookDeadLetterOrder(this.ks), json)]);
    return removed === 1;
  }
}

/**
 * Replays a dead letter: queues its delivery again with a fresh retry schedule and the same
 * webhook-id (a receiver that got it after all deduplicates), then removes it. False when there
 * is no such dead letter (replayed already, or never there). `queue` is made only when needed.
 */
export async function replayDeadLetter(letters: DeadLetters, queue: () => Queue<WebhookJob>, id: string): Promise<boolean> {
  const letter = await letters.get(id);
  if (!letter) return false;
  const { endpointId, webhookId, type, body } = letter;
  await queue().add('replay', { attempts: 0, deliveries: [{ endpointId, webhookId, type, body }] }, { jobId: `replay.${id}` });
  await letters.remove(id);
  return true;
}
