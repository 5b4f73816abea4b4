import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { Cluster } from 'ioredis';
import { startRedisCluster } from '../support/redis-server.js';
import { CallStore, fingerprint } from '../../src/calls/store.js';
import { EventLog } from '../../src/events/eventLog.js';
import { PushRegistry } from '../../src/push/registry.js';
import { DAY_MS } from '../../src/calls/retention.js';
import { deliveriesFor } from '../../src/events/audience.js';
import { parseChange } from '../../src/calls/change.js';
import { keys } from '../../src/redis/keys.js';
import { aliceCallsBob } from '../support/fixtures.js';

/**
 * "Redis Cluster ready": every script's keys share one hash tag, so the same scripts run on a
 * real 3-node cluster without CROSSSLOT errors, with calls spread over the shards.
 */
let cluster: Awaited<ReturnType<typeof startRedisCluster>>;
let client: Cluster;
const ks = { prefix: 'cb', shards: 8 };

beforeAll(async () => {
  cluster = await startRedisCluster(3);
  client = new Cluster(cluster.nodes, { enableAutoPipelining: true });
});
afterAll(async () => {
  client?.disconnect();
  await cluster?.stop();
});

describe('Lua scripts on Redis Cluster', () => {
  it('create, answer, end, read and expire run on a cluster; the outbox entries carry every change', async () => {
    const calls = new CallStore(client, { ...ks, ringTimeoutMs: 45_000, retentionMs: 60_000, operationTtlMs: 86_400_000, callWaiting: false, maxRenamesPerCall: 10 });
    const slots = new Set<number>();
    for (let i = 0; i < 12; i++) {
      const callId = randomUUID();
      const created = await calls.create(aliceCallsBob(callId, `op-${callId}`));
      expect(created).toMatchObject({ kind: 'outcome', code: 'ok', status: 201 });
      const answered = await calls.answer({
        callId,
        userId: 'bob',
        installationId: 'bob-phone',
        expectedRevision: '1',
        operationId: `a-${callId}`,
        fingerprint: fingerprint('answer', [callId, 'bob-phone', '1']),
      });
      expect(answered).toMatchObject({ kind: 'outcome', code: 'ok', call: { state: 'accepted', revision: '2' } });
      const ended = await calls.end({
        callId,
        userId: 'alice',
        installationId: 'alice-phone',
        reason: 'localHangup',
        operationId: `e-${callId}`,
        fingerprint: fingerprint('end', [callId, 'localHangup']),
      });
      expect(ended).toMatchObject({ kind: 'outcome', call: { state: 'ended', revision: '3' } });
      expect(await calls.read(callId, 'bob')).toMatchObject({ kind: 'outcome', call: { state: 'ended' } });
      slots.add(Number(await client.cluster('KEYSLOT', keys.call(ks, callId))));
    }
    // Spread over several shards, hence (very likely) several slots and nodes.
    expect(slots.size).toBeGreaterThan(1);
    let entries = 0;
    for (let shard = 0; shard < ks.shards; shard++) {
      const list = (await client.xrange(keys.outboxForShard(ks, shard), '-', '+')) as [string, string[]][];
      for (const [id, fields] of list) {
        const change = parseChange(id, shard, fields);
        expect(deliveriesFor(change).length).toBeGreaterThan(0);
        entries++;
      }
    }
    expect(entries).toBe(36);
  });

  it('event log append/read and push registrations run on a cluster', async () => {
    const log = new EventLog(client, { ...ks, maxLen: 100, maxAgeMs: 60_000, metaTtlMs: 600_000 });
    const head = await log.read('carol', 'carol-phone', undefined, 10);
    expect(head.kind).toBe('events');
    const payload = { schemaVersion: 1 as const, eventId: 'e1', type: 'call.ended' as const, callId: 'c', revision: '2', occurredAtMs: 1, reason: 'declined' as const };
    await log.append('carol', 0, [{ entryId: '1-1', delivery: { userId: 'carol', payload } }]);
    const { decodeCursor } = await import('../../src/events/cursor.js');
    const page = await log.read('carol', 'carol-phone', decodeCursor((head as { nextCursor: string }).nextCursor), 10);
    expect(page.kind === 'events' && page.events.map((e) => JSON.parse(e.json))).toEqual([payload]);

    const registry = new PushRegistry(client, ks, DAY_MS);
    await registry.register({ userId: 'carol', installationId: 'carol-phone', kind: 'androidPush', token: 'token-for-carol-1', appId: 'com.example' });
    expect((await registry.list('carol')).map((r) => r.installationId)).toEqual(['carol-phone']);
    // Rebinding across users (different slots) works too.
    await registry.register({ userId: 'dave', installationId: 'dave-phone', kind: 'androidPush', token: 'token-for-carol-1', appId: 'com.example' });
    expect(await registry.list('carol')).toEqual([]);
  });
});
