import type { Redis, Cluster, ChainableCommander } from 'ioredis';
import { callFromHash, CorruptRecordError, parseCallFields, type CallRecord } from './model.js';

/**
 * A call's key as the call scripts write it (lua/includes/callRead.lua): one string, the JSON
 * list of the call's fields and values in order, so each write and the key's lifetime are one SET.
 * Versions before 2026-11-26 stored a hash, and CALL_RECORD_FORMAT=hash still does (for a rolling
 * upgrade from one of those): such a call is read as one (its GET fails WRONGTYPE), and stays one
 * (docs/keyspace.md "Per call").
 */

/** The call a stored value holds; undefined when the key is gone. */
export function callFromStored(stored: string | null): CallRecord | undefined {
  if (stored === null) return undefined;
  let flat: unknown;
  try {
    flat = JSON.parse(stored);
  } catch {
    throw new CorruptRecordError('call record is not JSON');
  }
  return parseCallFields(flat);
}

const isWrongType = (err: unknown): boolean => String((err as Error)?.message).startsWith('WRONGTYPE');

/**
 * Reads a call by its key: one GET, or with `pipeline` a GET in that pipeline (sent with its
 * other commands). A call stored as a hash by an earlier version is read with HGETALL.
 */
export function readStoredCall(redis: Redis | Cluster, key: string, pipeline?: ChainableCommander): Promise<CallRecord | undefined> {
  const get = pipeline
    ? new Promise<string | null>((resolve, reject) => pipeline.get(key, (err, r) => (err ? reject(err) : resolve(r ?? null))))
    : redis.get(key);
  return get.then(callFromStored, async (err: unknown) => {
    if (!isWrongType(err)) throw err;
    return callFromHash(await redis.hgetall(key));
  });
}
