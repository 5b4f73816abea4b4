import type { Redis, Cluster } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import { runScript } from '../redis/scripts.js';
import { isCluster } from '../redis/connection.js';
import type { PushRegistry } from './registry.js';

/**
 * Push registrations stored by version 0.1.0 — a set `{u:<id>}:devices` of
 * "<installationId>\n<kind>" and a hash `{u:<id>}:push:<kind>:<installationId>` per registration —
 * are moved into the user's registrations hash (docs/operations.md "Upgrading"), one registration per atomic
 * step (lua/migrateLegacyRegistration.lua). Idempotent and safe beside running servers: a
 * registration written since in the new form is kept. A marker key records that it is done, so
 * later starts skip the scan.
 */

const MIGRATION = 'push-registrations-0.2';

export async function migrateLegacyRegistrations(redis: Redis | Cluster, ks: KeySpace, registry: PushRegistry): Promise<{ moved: number } | 'already done'> {
  if ((await redis.exists(keys.migrationDone(ks, MIGRATION))) === 1) return 'already done';
  const pattern = keys.legacyDevices(ks, '*');
  const [head = '', tail = ''] = pattern.split('*');
  let moved = 0;
  const nodes: Redis[] = isCluster(redis) ? redis.nodes('master') : [redis];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, found] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      for (const devicesKey of found) {
        const userId = devicesKey.slice(head.length, -tail.length);
        if (keys.legacyDevices(ks, userId) !== devicesKey) continue;
        for (const member of await redis.smembers(devicesKey)) {
          const [installationId = '', kind = ''] = member.split('\n');
          const [done, expireAt, ...held] = (await runScript(
            redis,
            'migrateLegacyRegistration',
            [devicesKey, keys.legacyPushRegistration(ks, userId, installationId, kind), keys.pushRegistrations(ks, userId)],
            [member, String(registry.idleMs)],
          )) as [number, string?, ...string[]];
          if (done === 1) await registry.keepOwners(userId, expireAt!, held);
          moved += done;
        }
      }
    } while (cursor !== '0');
  }
  await redis.set(keys.migrationDone(ks, MIGRATION), String(Date.now()));
  return { moved };
}
