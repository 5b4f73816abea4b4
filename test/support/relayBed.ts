import { afterAll, beforeAll } from 'vitest';
import { TEST_REDIS_COMMAND_TIMEOUT_MS } from './server.js';
import { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import { startRedis, type RedisServer } from './redis-server.js';
import { connectRedis } from '../../src/redis/connection.js';
import { loadScripts } from '../../src/redis/scripts.js';
import type { KeySpace } from '../../src/redis/keys.js';
import { CallStore, type StoreSettings } from '../../src/calls/store.js';
import { EventLog } from '../../src/events/eventLog.js';
import { createLogger } from '../../src/util/logger.js';

/**
 * What the relay's integration tests run a relay against: a Redis of the file's own with the
 * scripts loaded, a call store and an event log on it (started before the file's tests, stopped
 * after), and a logger that writes nothing.
 */
export interface RelayBed {
  server: RedisServer;
  redis: Redis;
  calls: CallStore;
  eventLog: EventLog;
}

export const silentLogger = createLogger('fatal', new Writable({ write: (_c, _e, cb) => cb() }));

export function relayBed(ks: KeySpace, store: Partial<StoreSettings> = {}): RelayBed {
  const bed = {} as RelayBed;
  beforeAll(async () => {
    bed.server = await startRedis();
    bed.redis = connectRedis(bed.server.url, 'commands', 'test', TEST_REDIS_COMMAND_TIMEOUT_MS);
    await bed.redis.connect();
    await loadScripts(bed.redis);
    bed.calls = new CallStore(bed.redis, { ...ks, ringTimeoutMs: 45_000, retentionMs: 60_000, operationTtlMs: 60_000, callWaiting: false, maxRenamesPerCall: 10, ...store });
    bed.eventLog = new EventLog(bed.redis, { ...ks, maxLen: 100, maxAgeMs: 60_000, metaTtlMs: 600_000 });
  });
  afterAll(async () => {
    bed.redis?.disconnect();
    await bed.server?.stop();
  });
  return bed;
}
