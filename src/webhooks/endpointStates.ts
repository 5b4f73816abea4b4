import type { Redis, Cluster } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';

/**
 * Which webhook endpoints a receiver disabled by answering 410 Gone (docs/webhooks.md "Delivery").
 * Kept in Redis so every process agrees and a restart does not revive one; read through a cache
 * renewed every REFRESH_MS, so the relay's hot path reads nothing. An operator enables one again
 * through the server API.
 */
const REFRESH_MS = 2000;

export interface DisabledEndpoint {
  atMs: number;
  status: number;
}

export class EndpointStates {
  private disabled = new Map<string, DisabledEndpoint>();
  private readAtMs = 0;
  private reading: Promise<void> | undefined;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly ks: KeySpace,
  ) {}

  /** Whether the endpoint is disabled, as last read (starts a read when the cache is old). */
  isDisabled(endpointId: string): boolean {
    if (Date.now() - this.readAtMs > REFRESH_MS) void this.refresh().catch(() => {});
    return this.disabled.has(endpointId);
  }

  async all(): Promise<Map<string, DisabledEndpoint>> {
    await this.refresh(true);
    return new Map(this.disabled);
  }

  async refresh(force = false): Promise<void> {
    if (!force && Date.now() - this.readAtMs <= REFRESH_MS) return;
    this.reading ??= this.redis
      .hgetall(keys.webhookDisabled(this.ks))
      .then((h) => {
        this.disabled = new Map(Object.entries(h).map(([id, json]) => [id, JSON.parse(json) as DisabledEndpoint]));
        this.readAtMs = Date.now();
      })
      .finally(() => (this.reading = undefined));
    await this.reading;
  }

  /** Disables it; true when it was enabled until now. */
  async disable(endpointId: string, status: number): Promise<boolean> {
    const state: DisabledEndpoint = { atMs: Date.now(), status };
    this.disabled.set(endpointId, state);
    return (await this.redis.hsetnx(keys.webhookDisabled(this.ks), endpointId, JSON.stringify(state))) === 1;
  }

  /** Enables it again; true when it was disabled. */
  async enable(endpointId: string): Promise<boolean> {
    this.disabled.delete(endpointId);
    return (await this.redis.hdel(keys.webhookDisabled(this.ks), endpointId)) === 1;
  }
}
