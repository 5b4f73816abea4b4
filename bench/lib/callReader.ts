import type { ChainableCommander, Redis } from 'ioredis';
import type { CallRecord } from '../../src/calls/model.js';
import { callFromStored, readStoredCall } from '../../src/calls/storedCall.js';

/**
 * How the bench reads a call's record: through the project's own reader (src/calls/storedCall.ts,
 * readStoredCall: one JSON string, or a hash in CALL_RECORD_FORMAT=hash), never a key layout of its
 * own, so a storage change cannot leave a scenario reading what is no longer there.
 */
export type CallReader = (redis: Redis, key: string, pipeline: ChainableCommander) => Promise<CallRecord | undefined>;

/**
 * A reader that knows only the string form (GET, no hash fallback), as a bench with its own idea
 * of the layout would read. Only the bench smoke test's negative check uses it
 * (BENCH_CALL_READER=string-only with --record-format hash): the run must then be INVALID.
 */
const stringOnly: CallReader = (_redis, key, pipeline) =>
  new Promise<string | null>((resolve, reject) => pipeline.get(key, (err, r) => (err ? reject(err) : resolve(r ?? null)))).then(callFromStored);

/** The reader of this run: the project's, unless BENCH_CALL_READER=string-only breaks it on purpose. */
export function callReader(): CallReader {
  return process.env.BENCH_CALL_READER === 'string-only' ? stringOnly : readStoredCall;
}
