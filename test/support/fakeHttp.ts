import type { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import { decodeJwt, decodeProtectedHeader, type JWTPayload, type ProtectedHeaderParameters } from 'jose';

/** Request-handling helpers shared by the fake push providers (apns-server.ts, fcm-server.ts). */

export interface DecodedJwt {
  header: ProtectedHeaderParameters;
  payload: JWTPayload;
}

/** The token of `Authorization: Bearer <t>`; both providers take the scheme in any case. */
export function bearerToken(authorization: string | undefined): string | null {
  return /^bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1] ?? null;
}

/** A JWT's header and claims without verifying it (for recording what was sent). */
export function decodeUnverified(jwt: string): DecodedJwt | null {
  try {
    return { header: decodeProtectedHeader(jwt), payload: decodeJwt(jwt) };
  } catch {
    return null;
  }
}

export interface Body {
  text: string;
  tooLarge: boolean;
}

/** Reads the whole body but keeps at most `limit` bytes, so an oversized one cannot eat memory. */
export async function readBody(req: AsyncIterable<Buffer>, limit: number): Promise<Body> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size <= limit) chunks.push(chunk);
  }
  return { text: size <= limit ? Buffer.concat(chunks).toString('utf8') : '', tooLarge: size > limit };
}

/** Request headers without HTTP/2 pseudo-headers, multiple values joined. */
export function plainHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (name.startsWith(':') || value === undefined) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

export function parseJsonOrText(text: string): unknown {
  if (text === '') return undefined;
  return parseJson(text) ?? text;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function waitForCount<T>(events: EventEmitter, items: T[], n: number, timeoutMs: number, what: string): Promise<T[]> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      if (items.length < n) return;
      cleanup();
      resolve(items.slice());
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`waited ${timeoutMs} ms for ${n} ${what}, got ${items.length}`));
    }, timeoutMs);
    const cleanup = (): void => {
      clearTimeout(timer);
      events.off('change', check);
    };
    events.on('change', check);
    check();
  });
}
