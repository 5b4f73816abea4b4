import type { Redis, Cluster } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import { runScript } from '../redis/scripts.js';
import { primaries } from '../redis/connection.js';
import type { PushRegistry } from './registry.js';

/**
 * Push registrations stored by version 0.1.0 — a set `{u:<id>}:devices` of
 * "<installationId>\n<kind>" and a hash `{u:<id>}:push:<kind>:<installationId>` per registration —
 * are moved into the user's registrations hash (docs/operations.md "Upgrading"), one registration per atomic
 * step (lua/migrateLegacyRegistration.lua). Idempotent and safe beside running servers: a
 * registration written since in the new form is kept. A marker key records that it is done, so
 * later starts skip the scan.
 */

/** The move's name in its done marker (keys.migrationDone). */
export const REGISTRATIONS_MOVE = 'push-registrations-0.2';

export async function migrateLegacyRegistrations(redis: Redis | Cluster, ks: KeySpace, registry: PushRegistry): Promise<{ moved: number } | 'already done'> {
  if ((await redis.exists(keys.migrationDone(ks, REGISTRATIONS_MOVE))) === 1) return 'already done';
  let moved = 0;
  await forEachUserKey(redis, keys.legacyDevices(ks, '*'), (userId) => keys.legacyDevices(ks, userId), async (devicesKey, userId) => {
    for (const member of await redis.smembers(devicesKey)) {
      const [installationId = '', kind = ''] = member.split('\n');
      const [done, expireAt, ...held] = (await runScript(
        redis,
        'migrateLegacyRegistration',
        [devicesKey, keys.legacyPushRegistration(ks, userId, installationId, kind), keys.pushRegistrations(ks, userId)],
        { field: member, idleMs: String(registry.idleMs) },
      )) as [number, string?, ...string[]];
      if (done === 1) await registry.keepOwners(userId, expireAt!, held);
      moved += done;
    }
  });
  await redis.set(keys.migrationDone(ks, REGISTRATIONS_MOVE), String(Date.now()));
  return { moved };
}

const IDLE_EXPIRY = 'push-idle-expiry';

/**
 * Registrations hashes and token owner keys written before idle expiry (docs/keyspace.md "Push
 * registrations") have no TTL: each hash gets the one a registration write gives it, with its
 * tokens' owner keys; an owner key left without one after that names a registration that no
 * longer holds its token, and is deleted. Once, after the move above, beside running servers (a
 * registration written meanwhile already has its TTL and is left as it is).
 */
export async function expireUntouchedRegistrations(redis: Redis | Cluster, ks: KeySpace, registry: PushRegistry): Promise<{ registrations: number; ownersDeleted: number } | 'already done'> {
  if ((await redis.exists(keys.migrationDone(ks, IDLE_EXPIRY))) === 1) return 'already done';
  let registrations = 0;
  let ownersDeleted = 0;
  await forEachUserKey(redis, keys.pushRegistrations(ks, '*'), (userId) => keys.pushRegistrations(ks, userId), async (_key, userId) => {
    if (await registry.expireUntouched(userId)) registrations++;
  });
  const ownerPattern = keys.pushTokenOwner(ks, '*', '*');
  await forEachKey(redis, ownerPattern, async (ownerKey) => {
    const m = /:tok:([^:]+):([^:]+)$/.exec(ownerKey);
    if (!m || keys.pushTokenOwner(ks, m[1]!, m[2]!) !== ownerKey || (await redis.pttl(ownerKey)) !== -1) return;
    if ((await registry.settleUntouchedOwner(m[1]!, m[2]!)) === 'deleted') ownersDeleted++;
  });
  await redis.set(keys.migrationDone(ks, IDLE_EXPIRY), String(Date.now()));
  return { registrations, ownersDeleted };
}

/** Every key matching `pattern` on every primary (SCAN). */
async function forEachKey(redis: Redis | Cluster, pattern: string, each: (key: string) => Promise<void>): Promise<void> {
  const nodes = primaries(redis);
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, found] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      for (const key of found) await each(key);
    } while (cursor !== '0');
  }
}

/** Every key of a user-key pattern (`userKey('*')`), with its userId (a key that only looks like one is skipped). */
function forEachUserKey(redis: Redis | Cluster, pattern: string, userKey: (userId: string) => string, each: (key: string, userId: string) => Promise<void>): Promise<void> {
  const [head = '', tail = ''] = pattern.split('*');
  return forEachKey(redis, pattern, async (key) => {
    const userId = key.slice(head.length, key.length - tail.length);
    if (userKey(userId) === key) await each(key, userId);
  });
}
