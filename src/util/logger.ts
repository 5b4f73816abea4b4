import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * Structured JSON logs. Secrets, push tokens and payloads are never logged on purpose; the
 * redaction list is the safety net for a field that slips through.
 */
export const REDACTED_PATHS = [
  'authorization',
  '*.authorization',
  'token',
  '*.token',
  'accessToken',
  '*.accessToken',
  'payload',
  '*.payload',
  'body',
  '*.body',
  'secret',
  '*.secret',
  'privateKey',
  '*.privateKey',
];

/**
 * Lines go to stdout in batches: when 4 KiB have gathered, and at least every 100 ms. A line per
 * call change made a write (a system call) of its own, a good share of the relay's CPU; batched,
 * a busy process writes its logs a few times a second. Whatever is buffered is written when the
 * process exits, even on an uncaught error; only a SIGKILL loses the last 100 ms of lines. A
 * `destination` given (dev mode: stdout, line by line; tests) replaces this.
 */
const LOG_BATCH_BYTES = 4096;
const LOG_FLUSH_EVERY_MS = 100;

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      // Level names ("info"), not pino's numbers: readable as they are and by every log shipper.
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination ?? pino.destination({ dest: 1, sync: false, minLength: LOG_BATCH_BYTES, periodicFlush: LOG_FLUSH_EVERY_MS }),
  );
}
