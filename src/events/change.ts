import { parseCallFields, CorruptRecordError, type CallRecord } from '../calls/model.js';

/** One change of a call as the call scripts wrote it to the outbox (lua/includes/appendOutbox.lua). */
export type ChangeKind = 'created' | 'answered' | 'ended' | 'renamed';

export interface CallChange {
  /** The outbox entry ID (also tells the shard apart via `shard`). */
  entryId: string;
  shard: number;
  kind: ChangeKind;
  atMs: number;
  call: CallRecord;
}

const KINDS = new Set<string>(['created', 'answered', 'ended', 'renamed']);

/** Parses one outbox entry's flat field list: `change <kind> at <ms> <call fields…>`. */
export function parseChange(entryId: string, shard: number, flat: string[]): CallChange {
  if (flat[0] !== 'change' || flat[2] !== 'at') throw new CorruptRecordError(`outbox entry ${entryId} has no change header`);
  const kind = flat[1] ?? '';
  if (!KINDS.has(kind)) throw new CorruptRecordError(`outbox entry ${entryId} has unknown change ${kind}`);
  const atMs = Number(flat[3]);
  if (!Number.isSafeInteger(atMs)) throw new CorruptRecordError(`outbox entry ${entryId} has a bad time`);
  return { entryId, shard, kind: kind as ChangeKind, atMs, call: parseCallFields(flat.slice(4)) };
}
