import { Http2RequestError } from './http2Pool.js';
import type { SendFailure } from './sendResult.js';

/** Helpers both provider clients use to read answers without trusting them. */

/** Parses a JSON body, or returns undefined: error bodies from proxies are often HTML. */
export function parseJsonBody(body: string): unknown {
  if (body.length === 0) return undefined;
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return undefined;
  }
}

// Provider reason codes are short identifiers; anything else (a proxy's HTML, a message that
// might quote the request) is not copied into results that end up in logs.
const REASON_CODE = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;

export function reasonCode(candidate: unknown, status: number): string {
  return typeof candidate === 'string' && REASON_CODE.test(candidate) ? candidate : `status ${status}`;
}

/**
 * `retry-after` (RFC 9110 10.2.3): delay-seconds or an HTTP date. Returns milliseconds from
 * now, or undefined when absent or unreadable.
 */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number): number | undefined {
  const v = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!v) return undefined;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  // Every HTTP-date form names the month; Date.parse alone would read "-5" as a year.
  if (!/[A-Za-z]{3}/.test(v)) return undefined;
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}

export function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** A request that never got an answer: always worth retrying later. */
export function transportFailure(err: unknown): SendFailure {
  if (!(err instanceof Http2RequestError)) throw err;
  return { ok: false, kind: 'retry', reason: err.kind === 'timeout' ? 'timeout' : `network ${err.code ?? err.kind}` };
}
