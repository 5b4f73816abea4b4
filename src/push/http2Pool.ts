import http2, { type ClientHttp2Session, type ClientHttp2Stream, type SecureClientSessionOptions } from 'node:http2';

/**
 * One long-lived HTTP/2 session per provider origin.
 *
 * Push providers want exactly this: APNs treats opening a connection per push as a
 * denial-of-service attempt, and both providers multiplex thousands of concurrent streams over
 * one connection. A session is opened on first use and replaced once it closes, fails or
 * receives GOAWAY (providers send GOAWAY for maintenance and to rebalance clients).
 *
 * `http://` origins use cleartext HTTP/2 with prior knowledge (h2c), for local test providers;
 * `https://` origins use TLS with ALPN `h2`.
 */

export interface Http2PoolOptions {
  /** Extra options for `http2.connect` (e.g. `ca` for a private test CA). */
  connectOptions?: SecureClientSessionOptions;
  /** Bodies larger than this are refused: provider answers are small JSON documents. */
  maxResponseBytes?: number;
}

export interface Http2RequestInit {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
}

export interface Http2Response {
  status: number;
  /** Response headers, lower-case, without pseudo-headers. */
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export type Http2RequestErrorKind = 'timeout' | 'network' | 'closed' | 'responseTooLarge';

/**
 * A request that got no usable answer. Messages name the origin only: request paths carry
 * device tokens.
 */
export class Http2RequestError extends Error {
  override name = 'Http2RequestError';
  constructor(
    readonly kind: Http2RequestErrorKind,
    message: string,
    /** The system or HTTP/2 error code (ECONNREFUSED, ERR_HTTP2_STREAM_ERROR, …), when known. */
    readonly code?: string,
  ) {
    super(message);
  }
}

const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;

interface PooledSession {
  session: ClientHttp2Session;
  /** Requests under way: the session holds the event loop open only while this is > 0. */
  active: number;
}

export class Http2Pool {
  private readonly sessions = new Map<string, PooledSession>();
  private readonly connectOptions: SecureClientSessionOptions;
  private readonly maxResponseBytes: number;
  private created = 0;
  private closed = false;

  constructor(options: Http2PoolOptions = {}) {
    this.connectOptions = options.connectOptions ?? {};
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  }

  /** Sessions opened since the pool was created (reconnects included). */
  get sessionsCreated(): number {
    return this.created;
  }

  /** Sessions currently open. */
  get openSessions(): number {
    return this.sessions.size;
  }

  /**
   * Sends one request and reads the whole answer. Rejects with `Http2RequestError` when no
   * answer arrives within `timeoutMs` (connecting included) or the connection fails; any HTTP
   * status resolves.
   */
  async request(origin: string, init: Http2RequestInit, timeoutMs: number): Promise<Http2Response> {
    const key = normalizeOrigin(origin);
    const startedAt = Date.now();
    try {
      return await this.attempt(key, init, timeoutMs);
    } catch (err) {
      // A stream refused by GOAWAY or REFUSED_STREAM was never processed by the peer
      // (RFC 9113 8.7), so sending it once more on a fresh session cannot duplicate a push.
      const left = timeoutMs - (Date.now() - startedAt);
      if (err instanceof Http2RequestError && err.kind === 'closed' && !this.closed && left > 0) {
        return this.attempt(key, init, left);
      }
      throw err;
    }
  }

  /**
   * Closes every session, letting requests under way finish for up to `graceMs`; sessions still
   * open then (a peer that stopped answering, a connect that hangs) are destroyed, so shutdown
   * is bounded. Later requests are refused.
   */
  async close(graceMs = 5_000): Promise<void> {
    this.closed = true;
    const all = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.all(
      all.map(
        ({ session }) =>
          new Promise<void>((resolve) => {
            if (session.destroyed) return resolve();
            const force = setTimeout(() => session.destroy(), graceMs);
            force.unref();
            session.once('close', () => {
              clearTimeout(force);
              resolve();
            });
            // close() ignores a session already closing (GOAWAY); the 'close' event still comes.
            if (!session.closed) session.close();
          }),
      ),
    );
  }

  /**
   * Retires the session to `origin` (a provider that answered it is shutting down): the next
   * request opens a new one, and requests under way on the old one finish there.
   */
  retire(origin: string): void {
    const key = normalizeOrigin(origin);
    const pooled = this.sessions.get(key);
    if (!pooled) return;
    this.sessions.delete(key);
    if (!pooled.session.closed && !pooled.session.destroyed) pooled.session.close();
  }

  private attempt(origin: string, init: Http2RequestInit, timeoutMs: number): Promise<Http2Response> {
    if (this.closed) return Promise.reject(new Http2RequestError('closed', 'HTTP/2 pool is closed'));
    const pooled = this.sessionFor(origin);
    const { session } = pooled;

    return new Promise<Http2Response>((resolve, reject) => {
      let stream: ClientHttp2Stream;
      let settled = false;
      pooled.active++;
      if (pooled.active === 1) session.ref();

      const finish = (err: Http2RequestError | undefined, res?: Http2Response, bug?: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        pooled.active--;
        if (pooled.active === 0 && !session.destroyed) session.unref();
        if (bug !== undefined) reject(bug);
        else if (err) reject(err);
        else resolve(res!);
      };

      const timer = setTimeout(() => {
        finish(new Http2RequestError('timeout', `no answer from ${origin} within ${timeoutMs} ms`));
        if (stream && !stream.destroyed) stream.close(http2.constants.NGHTTP2_CANCEL);
        this.checkHealth(origin, pooled, timeoutMs);
      }, timeoutMs);

      try {
        stream = session.request({
          ':method': init.method,
          ':path': init.path,
          ...init.headers,
        });
      } catch (err) {
        if (!session.closed && !session.destroyed) {
          // Invalid headers and the like: a bug in the caller, not a network condition.
          finish(undefined, undefined, err);
          return;
        }
        // The session started closing (GOAWAY) between sessionFor() and here.
        this.forget(origin, pooled);
        finish(new Http2RequestError('closed', `session to ${origin} was closing`, errorCode(err)));
        return;
      }

      let status = 0;
      let headers: Http2Response['headers'] = {};
      const chunks: Buffer[] = [];
      let size = 0;

      stream.on('response', (h) => {
        status = Number(h[':status']);
        headers = {};
        for (const [name, value] of Object.entries(h)) if (!name.startsWith(':')) headers[name] = value;
      });
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > this.maxResponseBytes) {
          finish(new Http2RequestError('responseTooLarge', `answer from ${origin} exceeds ${this.maxResponseBytes} bytes`));
          stream.close(http2.constants.NGHTTP2_CANCEL);
          return;
        }
        chunks.push(chunk);
      });
      stream.on('end', () => {
        if (status === 0) return;
        finish(undefined, { status, headers, body: Buffer.concat(chunks).toString('utf8') });
      });
      stream.on('error', (err) => {
        finish(streamError(origin, err, stream.rstCode));
      });
      stream.on('close', () => {
        if (settled) return;
        if (status !== 0 && stream.rstCode === http2.constants.NGHTTP2_NO_ERROR) {
          finish(undefined, { status, headers, body: Buffer.concat(chunks).toString('utf8') });
        } else {
          finish(streamError(origin, undefined, stream.rstCode));
        }
      });

      stream.end(init.body === undefined ? undefined : typeof init.body === 'string' ? Buffer.from(init.body) : init.body);
    });
  }

  private sessionFor(origin: string): PooledSession {
    const existing = this.sessions.get(origin);
    if (existing && !existing.session.closed && !existing.session.destroyed) return existing;
    if (existing) this.sessions.delete(origin);

    const session = http2.connect(origin, this.connectOptions);
    this.created++;
    const pooled: PooledSession = { session, active: 0 };
    this.sessions.set(origin, pooled);
    session.unref();

    // Without an 'error' listener a failed connection would crash the process; the streams
    // on it fail on their own and report the error to their callers.
    session.on('error', () => this.forget(origin, pooled));
    session.on('goaway', () => this.forget(origin, pooled));
    session.on('close', () => this.forget(origin, pooled));
    return pooled;
  }

  private forget(origin: string, pooled: PooledSession): void {
    if (this.sessions.get(origin) === pooled) this.sessions.delete(origin);
  }

  /**
   * After a timeout: a half-open TCP connection (a NAT that dropped it, a peer that vanished)
   * looks like a slow peer, and every later request on it would time out too. A PING that is
   * not answered in time means the session is dead; drop it so the next request reconnects.
   */
  private checkHealth(origin: string, pooled: PooledSession, timeoutMs: number): void {
    const { session } = pooled;
    if (session.destroyed || session.closed) return;
    if (session.connecting) {
      this.forget(origin, pooled);
      session.destroy();
      return;
    }
    const deadline = setTimeout(() => {
      this.forget(origin, pooled);
      session.destroy();
    }, timeoutMs);
    deadline.unref();
    const sent = session.ping((err) => {
      clearTimeout(deadline);
      if (err) {
        this.forget(origin, pooled);
        session.destroy();
      }
    });
    if (!sent) clearTimeout(deadline);
  }
}

function normalizeOrigin(origin: string): string {
  const url = new URL(origin);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TypeError(`push provider URL must be http:// or https://, got ${url.protocol}`);
  }
  return url.origin;
}

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

function streamError(origin: string, err: unknown, rstCode: number | undefined): Http2RequestError {
  const code = errorCode(err);
  if (code === 'ERR_HTTP2_GOAWAY_SESSION' || rstCode === http2.constants.NGHTTP2_REFUSED_STREAM) {
    return new Http2RequestError('closed', `${origin} refused the stream (GOAWAY)`, code ?? 'REFUSED_STREAM');
  }
  const cause = (err as { cause?: unknown } | null)?.cause;
  return new Http2RequestError('network', `request to ${origin} failed`, errorCode(cause) ?? code ?? `RST ${rstCode ?? '?'}`);
}
