import { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo, Server } from 'node:net';
import { decodeJwt, decodeProtectedHeader, type JWTPayload, type ProtectedHeaderParameters } from 'jose';

/**
 * The skeleton both fake push providers share (apns-server.ts, fcm-server.ts): listening,
 * reading and recording requests, answers scripted per device token, and waits for what arrived.
 */

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

function waitForCount<T>(events: EventEmitter, items: T[], n: number, timeoutMs: number, what: string): Promise<T[]> {
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

/** Requests in arrival order, and a wait for the n-th (all a fake's logs share one change signal). */
export class RequestLog {
  private readonly events = new EventEmitter();

  /** Appends `item` to `log` and wakes every wait. */
  record<T>(log: T[], item: T): void {
    log.push(item);
    this.events.emit('change');
  }

  /** Resolves with `log`'s items once at least `n` arrived. */
  waitFor<T>(log: T[], n: number, timeoutMs: number, what: string): Promise<T[]> {
    return waitForCount(this.events, log, n, timeoutMs, what);
  }
}

/**
 * What a fake answers a device token besides its own checks: scripted answers, each played once
 * (for one token, or for any with '*'), then the token's standing state until it is changed.
 */
export class TokenScript<Answer, State extends string> {
  private readonly queues = new Map<string, Answer[]>();
  private readonly states = new Map<string, State>();

  /** `key`: how the provider compares tokens (APNs: case-insensitive hex). */
  constructor(private readonly key: (token: string) => string = (t) => t) {}

  failNext(token: string, answer: Answer): void {
    const k = token === '*' ? '*' : this.key(token);
    this.queues.set(k, [...(this.queues.get(k) ?? []), answer]);
  }

  setState(token: string, state: State): void {
    this.states.set(this.key(token), state);
  }

  /** The next scripted answer for `token` (consumed), else for any token, else the token's state. */
  next(token: string): { scripted: Answer } | { state: State } | undefined {
    for (const k of [this.key(token), '*']) {
      const scripted = this.queues.get(k)?.shift();
      if (scripted !== undefined) return { scripted };
    }
    const state = this.states.get(this.key(token));
    return state === undefined ? undefined : { state };
  }
}

/** What every fake provider records of a request it received. */
export interface RecordedRequest {
  method: string;
  path: string;
  /** Regular headers, lower-case names (pseudo-headers left out). */
  headers: Record<string, string>;
  /** The body parsed as JSON, or the raw text when it is not JSON. */
  body: unknown;
  status: number;
  /** Epoch ms when the request reached the fake (an upper bound of its send time). */
  receivedAtMs: number;
}

/**
 * A fake provider: `url` once it listens on a free port of 127.0.0.1, scripted answers per device
 * token (`failNext`, `setTokenState`) and the log its waits read.
 */
export abstract class FakeProvider<Answer, State extends string> {
  /** `http://127.0.0.1:<port>`, set once listening. */
  url = '';
  protected readonly script: TokenScript<Answer, State>;
  protected readonly log = new RequestLog();

  /** `tokenKey`: how the provider compares tokens (TokenScript). */
  constructor(tokenKey?: (token: string) => string) {
    this.script = new TokenScript<Answer, State>(tokenKey);
  }

  /** Queues a scripted answer for the next valid push to `token` (or to any token with '*'). */
  failNext(token: string, answer: Answer): void {
    this.script.failNext(token, answer);
  }

  /** The token's standing answer from now on (each fake's State type says what each state answers). */
  setTokenState(token: string, state: State): void {
    this.script.setState(token, state);
  }

  protected async listenOn(server: Server): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }
}
