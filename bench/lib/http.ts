import { Pool } from 'undici';

/**
 * The generators' HTTP client: undici keep-alive connection pools (Node's global fetch costs
 * several times more CPU per request, which would make the generator the bottleneck). Requests
 * carry exactly what the typed client (packages/client/src/http.ts) sends: bearer token, JSON body.
 */

export interface HttpReply {
  status: number;
  /** The response body text ('' for none). */
  text: string;
}

export interface HttpOptions {
  connections?: number;
  pipelining?: number;
  /** Give up on a request after this long (default 10 s). */
  timeoutMs?: number;
  localAddress?: string;
}

export class JsonHttp {
  private readonly pool: Pool;

  constructor(origin: string, o: HttpOptions = {}) {
    this.pool = new Pool(origin, {
      connections: o.connections ?? 16,
      pipelining: o.pipelining ?? 1,
      keepAliveTimeout: 60_000,
      headersTimeout: o.timeoutMs ?? 10_000,
      bodyTimeout: o.timeoutMs ?? 10_000,
      ...(o.localAddress ? { localAddress: o.localAddress } : {}),
    });
  }

  async request(method: 'GET' | 'POST' | 'PUT', path: string, token: string, body?: unknown): Promise<HttpReply> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const res = await this.pool.request({
      method,
      path,
      headers: payload === undefined ? { authorization: `Bearer ${token}` } : { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(payload === undefined ? {} : { body: payload }),
    });
    return { status: res.statusCode, text: await res.body.text() };
  }

  post(path: string, token: string, body: unknown): Promise<HttpReply> {
    return this.request('POST', path, token, body);
  }

  async close(): Promise<void> {
    await this.pool.close();
  }
}
