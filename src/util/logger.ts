import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * Structured JSON logs. Secrets, push tokens and payloads are never logged on purpose; the
 * redaction is the safety net for a field that slips through: these keys, at the top of a line's
 * object or one level down (`{ token }`, `{ req: { authorization } }`), are written as
 * `[redacted]`.
 */
export const REDACTED_KEYS: ReadonlySet<string> = new Set(['authorization', 'token', 'accessToken', 'payload', 'body', 'secret', 'privateKey']);
const CENSOR = '[redacted]';

/**
 * The line's object with the redacted keys censored; the object itself when it holds none (the
 * common case: nothing is copied or allocated). The caller's objects are never changed. Not
 * pino's `redact` option: it parses its path list again on every line, the largest allocation of
 * a busy relay (one `call change` line per change).
 */
export function redacted(obj: Record<string, unknown>): Record<string, unknown> {
  let out: Record<string, unknown> | undefined;
  for (const key in obj) {
    if (REDACTED_KEYS.has(key)) {
      (out ??= { ...obj })[key] = CENSOR;
      continue;
    }
    const value = obj[key];
    if (value === null || typeof value !== 'object') continue;
    let inner: Record<string, unknown> | undefined;
    for (const k in value) {
      if (!REDACTED_KEYS.has(k)) continue;
      // A copy of an error stays an error (same prototype, message and stack) for its serializer.
      inner ??=
        value instanceof Error
          ? Object.assign(Object.create(Object.getPrototypeOf(value) as object) as Record<string, unknown>, value, { message: value.message, stack: value.stack })
          : { ...value };
      inner[k] = CENSOR;
    }
    if (inner) (out ??= { ...obj })[key] = inner;
  }
  return out ?? obj;
}

/**
 * Lines go to stdout in batches: when 4 KiB have gathered, and at least every 100 ms. A line per
 * call change made a write (a system call) of its own, a good share of the relay's CPU; batched,
 * a busy process writes its logs a few times a second. Whatever is buffered is written when the
 * process exits, even on an uncaught error; only a SIGKILL loses the last 100 ms of lines. A
 * `destination` given (dev mode: stdout, line by line; tests) replaces this.
 *
 * A reader of stdout that stops reading (a stuck log shipper, a full pipe) never stops the
 * server: a write that finds stdout full is tried again 100 ms later while calls go on, at most
 * LOG_BUFFER_MAX_BYTES (docs/configuration.md) of lines wait meanwhile, and lines past that are
 * dropped and counted (calling_log_lines_dropped_total). At exit the last lines get at most
 * LOG_EXIT_FLUSH_MS, so SIGTERM still ends the process.
 */
const LOG_BATCH_BYTES = 4096;
const LOG_FLUSH_EVERY_MS = 100;
const LOG_EXIT_FLUSH_MS = 1000;
/** LOG_BUFFER_MAX_BYTES's default (src/config/config.ts). */
export const DEFAULT_LOG_BUFFER_MAX_BYTES = 8 * 1024 * 1024;

let droppedLines = 0;

/** Log lines dropped because stdout's reader fell LOG_BUFFER_MAX_BYTES behind. */
export function droppedLogLines(): number {
  return droppedLines;
}

export function createLogger(level: string, destination?: NodeJS.WritableStream, bufferMaxBytes = DEFAULT_LOG_BUFFER_MAX_BYTES): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      // Level names ("info"), not pino's numbers: readable as they are and by every log shipper.
      formatters: { level: (label) => ({ level: label }), log: redacted },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination ?? stdoutInBatches(bufferMaxBytes),
  );
}

function stdoutInBatches(maxLength: number): ReturnType<typeof pino.destination> {
  // Node makes a pipe or socket on stdout non-blocking once its stream is opened: a write into a
  // full one then fails at once (EAGAIN), to be tried again, instead of blocking a thread of
  // libuv's pool for as long as the reader is stuck, and the process's exit, which waits for it.
  void process.stdout.fd;
  // Tried again for as long as it takes while the process runs (giving up would be an error
  // that ends it); within LOG_EXIT_FLUSH_MS when it exits.
  let retryUntil = Infinity;
  const stream = pino.destination({
    dest: 1,
    sync: false,
    minLength: LOG_BATCH_BYTES,
    periodicFlush: LOG_FLUSH_EVERY_MS,
    maxLength,
    retryEAGAIN: () => Date.now() < retryUntil,
  });
  stream.on('drop', () => void droppedLines++);
  // pino writes what is buffered with flushSync as the process exits (no event loop is left).
  const flushSync = stream.flushSync.bind(stream);
  stream.flushSync = () => {
    retryUntil = Date.now() + LOG_EXIT_FLUSH_MS;
    try {
      flushSync();
    } catch {
      // Still full: the rest is dropped.
    } finally {
      retryUntil = Infinity;
    }
  };
  return stream;
}
