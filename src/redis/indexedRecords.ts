import type { Redis, Cluster } from 'ioredis';
import { runScript } from './scripts.js';

/**
 * Records kept as the JSON members of a sorted set ordered by time (each JSON's first field its
 * id), read a page at a time, newest first, by an opaque cursor (lua/readIndexedRecords.lua):
 * call history, webhook dead letters.
 */
export interface IndexCursor {
  ms: string;
  id: string;
}

export interface RecordPage {
  /** Each record's JSON as stored, newest first. */
  records: string[];
  nextCursor: string | null;
}

export function encodeIndexCursor(c: IndexCursor): string {
  return Buffer.from(`${c.ms}\n${c.id}`).toString('base64url');
}

/** The cursor, or undefined when it is not one this server issued. */
export function decodeIndexCursor(cursor: string): IndexCursor | undefined {
  const m = /^(\d{1,16})\n([^\n]{1,200})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  return m ? { ms: m[1]!, id: m[2]! } : undefined;
}

/** `minMs`: records older than this are left out (past retention, not yet removed). */
export async function readIndexedPage(
  redis: Redis | Cluster,
  indexKey: string,
  opts: { cursor?: IndexCursor | undefined; limit: number; minMs: number },
): Promise<RecordPage> {
  const reply = (await runScript(redis, 'readIndexedRecords', [indexKey], {
    cursorMs: opts.cursor?.ms ?? '',
    cursorId: opts.cursor?.id ?? '',
    limit: String(opts.limit),
    minMs: String(Math.max(0, Math.floor(opts.minMs))),
  })) as string[];
  const records: string[] = [];
  let last: IndexCursor | undefined;
  for (let i = 1; i + 2 < reply.length; i += 3) {
    last = { id: reply[i]!, ms: reply[i + 1]! };
    records.push(reply[i + 2]!);
  }
  return { records, nextCursor: reply[0] === '1' && last ? encodeIndexCursor(last) : null };
}
