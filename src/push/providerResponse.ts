import { Http2RequestError, type Http2Response } from './http2Pool.js';
import type { SendFailure, SendResult } from './sendResult.js';

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

/** A refused answer that is not about the token: 429 and 5xx are worth retrying later, the rest never. */
export function retryOrFatal(res: Http2Response, reason: string, nowMs: number): SendFailure {
  const { status } = res;
  if (status === 429 || status >= 500) {
    const retryAfterMs = parseRetryAfter(res.headers['retry-after'], nowMs);
    return retryAfterMs === undefined ? { ok: false, kind: 'retry', reason, status } : { ok: false, kind: 'retry', reason, status, retryAfterMs };
  }
  return { ok: false, kind: 'fatal', reason, status };
}

export interface CredentialedRequest<C> {
  /** The cached credential, or the failure to report when none can be had. */
  credential(): Promise<C | SendFailure>;
  send(credential: C): Promise<Http2Response>;
  /** Whether the provider refused the credential itself (not the message). */
  refusesCredential(res: Http2Response): boolean;
  /** Drops the refused credential from the cache, so the next `credential()` makes a new one. */
  invalidate(credential: C): void;
  /**
   * Whether the provider answered that this connection is going away (APNs `Shutdown`,
   * `IdleTimeout`): the message was not taken, so it may go once more on a fresh connection.
   */
  asksReconnect?(res: Http2Response): boolean;
  /** Retires the current connection, so the next send opens a new one. */
  reconnect?(): void;
  classify(res: Http2Response): SendResult;
}

/**
 * One provider request with a cached credential (APNs provider JWT, FCM access token): a
 * credential the provider refuses is dropped and the request sent once more with a fresh one; a
 * fresh credential refused again is a configuration error, classified like any other answer. A
 * provider that asks for a new connection gets the request once more on a fresh one.
 */
export async function sendWithCredential<C>(r: CredentialedRequest<C>): Promise<SendResult> {
  let refreshed = false;
  let reconnected = false;
  for (;;) {
    const credential = await r.credential();
    if (isFailure(credential)) return credential;
    let res: Http2Response;
    try {
      res = await r.send(credential);
    } catch (err) {
      return transportFailure(err);
    }
    if (r.refusesCredential(res)) {
      r.invalidate(credential);
      if (!refreshed) {
        refreshed = true;
        continue;
      }
    } else if (r.asksReconnect?.(res)) {
      r.reconnect?.();
      if (!reconnected) {
        reconnected = true;
        continue;
      }
    }
    return r.classify(res);
  }
}

function isFailure(v: unknown): v is SendFailure {
  return typeof v === 'object' && v !== null && (v as { ok?: unknown }).ok === false;
}
