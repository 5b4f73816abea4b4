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
    destination ?? process.stdout,
  );
}
