import { Worker, type ConnectionOptions, type Job, type Queue } from 'bullmq';
import { partitionQueueName, queuePrefix, type Partitioning } from '../redis/partitions.js';
import type { Logger } from '../util/logger.js';
import type { WebhookEndpoint } from './endpoints.js';
import type { EndpointStates } from './endpointStates.js';
import type { DeadLetter, DeadLetters } from './deadLetters.js';
import { WEBHOOK_QUEUE, type WebhookDelivery, type WebhookJob } from './queue.js';
import { post } from './post.js';
import { webhookSigner, type WebhookSigner } from './signature.js';
import type { TokenRemoval } from '../push/registry.js';

/**
 * Sends webhook deliveries (docs/webhooks.md "Delivery"): each a POST of its body, signed by the
 * Standard Webhooks scheme with each of the endpoint's secrets (two while one rotates). A 2xx is
 * success; 410 disables the endpoint; anything else, a timeout or a network error is a failure,
 * retried after the next delay of the schedule (or the receiver's retry-after, if longer). After
 * the last, the delivery becomes a dead letter.
 */

export type WebhookOutcome = 'delivered' | 'retrying' | 'dead' | 'gone' | 'skipped';

export interface DelivererOptions {
  endpoints: readonly WebhookEndpoint[];
  states: EndpointStates;
  deadLetters: DeadLetters;
  /** WEBHOOK_RETRY_SCHEDULE: the delay before each retry; its length is the number of retries. */
  scheduleMs: readonly number[];
  timeoutMs: number;
  logger: Logger;
  /** Makes sure of a push.token_removed notice's removal; false: drop the notice (src/push/registry.ts ensureRemoved). */
  ensureRemoved?: (t: TokenRemoval) => Promise<boolean>;
  /** Each attempt's outcome and how long the receiver took (metrics). */
  observe?: (endpointId: string, outcome: WebhookOutcome, seconds: number) => void;
}

/** The longest retry-after honoured (a day), so a receiver cannot park a delivery for ever. */
const MAX_RETRY_AFTER_MS = 86_400_000;

type AttemptResult = { ok: true; skipped?: boolean } | { ok: false; gone: boolean; status: number | null; error: string | null; retryAfterMs: number };
type Attempt = AttemptResult & { seconds: number };

export class WebhookDeliverer {
  private readonly endpoints: Map<string, { url: URL; signers: WebhookSigner[] }>;

  constructor(private readonly opts: DelivererOptions) {
    this.endpoints = new Map(opts.endpoints.map((e) => [e.id, { url: new URL(e.url), signers: e.secrets.map(webhookSigner) }]));
  }

  /** Runs one job (a retry): every delivery once; the failures go on as new delayed jobs of the same queue. */
  run(job: Job<WebhookJob>, queue: Queue<WebhookJob>): Promise<void> {
    return this.deliver(job.data.deliveries, job.data.attempts, queue, String(job.id));
  }

  /**
   * Attempts each delivery once (after `before` attempts each); the failures go on as delayed jobs
   * of `queue` whose IDs derive from `runId`, so a run cut short and run again adds the same jobs,
   * not more. Resolves once they are queued and the exhausted ones are dead letters.
   */
  async deliver(deliveries: readonly WebhookDelivery[], before: number, queue: Queue<WebhookJob>, runId: string): Promise<void> {
    const attempts = before + 1;
    const results = await Promise.all(deliveries.map(async (d) => ({ d, result: await this.attempt(d) })));
    const retries = new Map<number, WebhookDelivery[]>();
    const dead: DeadLetter[] = [];
    const observe = (d: WebhookDelivery, outcome: WebhookOutcome, seconds: number) => this.opts.observe?.(d.endpointId, outcome, seconds);
    for (const { d, result } of results) {
      if (result.ok) {
        observe(d, result.skipped ? 'skipped' : 'delivered', result.seconds);
        continue;
      }
      if (result.gone) {
        observe(d, 'gone', result.seconds);
        if (await this.opts.states.disable(d.endpointId, 410)) {
          this.opts.logger.warn({ endpoint: d.endpointId }, 'webhook endpoint answered 410 Gone: disabled until enabled again through the server API');
        }
        continue;
      }
      const delay = this.opts.scheduleMs[attempts - 1];
      if (delay === undefined) {
        dead.push({ ...d, id: d.webhookId, attempts, lastStatus: result.status, lastError: result.error, failedAtMs: Date.now() });
        observe(d, 'dead', result.seconds);
        continue;
      }
      observe(d, 'retrying', result.seconds);
      const at = Math.max(delay, Math.min(result.retryAfterMs, MAX_RETRY_AFTER_MS));
      let list = retries.get(at);
      if (!list) retries.set(at, (list = []));
      list.push(d);
    }
    let n = 0;
    await Promise.all([...retries].map(([delay, list]) => queue.add('retry', { attempts, deliveries: list }, { delay, jobId: `${runId}.r${attempts}.${n++}` })));
    await this.opts.deadLetters.add(dead);
    if (dead.length > 0) this.opts.logger.warn({ deadLetters: dead.length, endpoints: [...new Set(dead.map((d) => d.endpointId))] }, 'webhook deliveries exhausted their retries');
  }

  private async attempt(d: WebhookDelivery): Promise<Attempt> {
    const target = this.endpoints.get(d.endpointId);
    // An endpoint removed from the configuration, or disabled since the job was made.
    if (!target || this.opts.states.isDisabled(d.endpointId)) return { ok: true, skipped: true, seconds: 0 };
    if (d.tokenRemoval && this.opts.ensureRemoved && !(await this.opts.ensureRemoved(d.tokenRemoval))) return { ok: true, skipped: true, seconds: 0 };
    const startedAt = performance.now();
    const seconds = Math.floor(Date.now() / 1000);
    const signature = target.signers.map((sign) => sign(d.webhookId, seconds, d.body)).join(' ');
    let result: AttemptResult;
    try {
      const res = await post(
        target.url,
        {
          'content-type': 'application/json',
          'webhook-id': d.webhookId,
          'webhook-timestamp': String(seconds),
          'webhook-signature': signature,
          'user-agent': 'calling-backend-webhooks',
        },
        d.body,
        this.opts.timeoutMs,
      );
      if (res.status >= 200 && res.status < 300) result = { ok: true };
      else {
        const retryAfter = res.headers['retry-after'];
        result = { ok: false, gone: res.status === 410, status: res.status, error: null, retryAfterMs: retryAfterMs(typeof retryAfter === 'string' ? retryAfter : null) };
      }
    } catch (err) {
      result = { ok: false, gone: false, status: null, error: (err as Error).message, retryAfterMs: 0 };
    }
    if (!result.ok) {
      this.opts.logger.info({ endpoint: d.endpointId, webhookId: d.webhookId, type: d.type, status: result.status, error: result.error }, 'webhook attempt failed');
    }
    return { ...result, seconds: (performance.now() - startedAt) / 1000 };
  }
}

/** retry-after as seconds or an HTTP date, in ms (0 when absent or unreadable). */
export function retryAfterMs(header: string | null, nowMs = Date.now()): number {
  if (!header) return 0;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? 0 : Math.max(0, at - nowMs);
}

/** One worker per queue partition. */
export function startWebhookWorkers(
  connection: ConnectionOptions,
  p: Partitioning,
  queues: readonly Queue<WebhookJob>[],
  concurrency: number,
  deliverer: WebhookDeliverer,
  logger: Logger,
): Worker<WebhookJob>[] {
  return queues.map((queue, i) => {
    const name = partitionQueueName(WEBHOOK_QUEUE, i);
    const worker = new Worker<WebhookJob>(name, (job) => deliverer.run(job, queue), {
      connection,
      prefix: queuePrefix(p.prefix),
      concurrency,
      // A worker that dies mid-run leaves its job locked: another runs it again once the lock is
      // older than lockDuration (found within stalledInterval), however often that happens.
      lockDuration: 10_000,
      stalledInterval: 5_000,
      maxStalledCount: 1000,
    });
    worker.on('error', (err) => logger.error({ err, queue: name }, 'webhook worker error'));
    return worker;
  });
}
