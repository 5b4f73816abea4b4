import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, queuePartitions } from '../../src/config/config.js';

/** QUEUE_PARTITIONS as the configuration reads it (docs/architecture.md "Queues"). */

const base = { AUTH_JWT_SECRET: 'x'.repeat(32) };

describe('queue partitions', () => {
  it('unset (or empty, as docker-compose passes it): 1 on a single Redis, 4 on a cluster', () => {
    expect(queuePartitions(loadConfig(base))).toBe(1);
    expect(queuePartitions(loadConfig({ ...base, QUEUE_PARTITIONS: '' }))).toBe(1);
    expect(queuePartitions(loadConfig({ ...base, REDIS_URL: undefined, REDIS_CLUSTER_NODES: '127.0.0.1:7000,127.0.0.1:7001' }))).toBe(4);
  });

  it('a set value wins, but never more than CALL_SHARDS', () => {
    expect(queuePartitions(loadConfig({ ...base, QUEUE_PARTITIONS: '3' }))).toBe(3);
    expect(queuePartitions(loadConfig({ ...base, REDIS_CLUSTER_NODES: '127.0.0.1:7000', QUEUE_PARTITIONS: '6' }))).toBe(6);
    expect(queuePartitions(loadConfig({ ...base, QUEUE_PARTITIONS: '32', CALL_SHARDS: '8' }))).toBe(8);
    expect(queuePartitions(loadConfig({ ...base, REDIS_CLUSTER_NODES: '127.0.0.1:7000', CALL_SHARDS: '2' }))).toBe(2);
  });

  it('refuses 0, a fraction or a word', () => {
    for (const bad of ['0', '1.5', 'four', '1025']) expect(() => loadConfig({ ...base, QUEUE_PARTITIONS: bad }), bad).toThrow(ConfigError);
  });
});
