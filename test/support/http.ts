import { connect } from 'node:net';

/**
 * A tiny HTTP client over Node's fetch (HTTP/1.1 keep-alive) for the integration tests. Every
 * response is read completely: status, headers, the exact body text, and the body parsed as JSON
 * when it is JSON.
 */

export interface ApiResponse {
  status: number;
  headers: Headers;
  /** The body exactly as received (byte-for-byte comparisons use this). */
  text: string;
  /** The body parsed as JSON; undefined when empty or not JSON. */
  json: any;
}

export interface RequestOptions {
  /** Extra or overriding headers (e.g. `content-type`, or `authorization` for another scheme). */
  headers?: Record<string, string>;
}

export type Body = unknown;

async function toResponse(res: Response): Promise<ApiResponse> {
  const text = await res.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/**
 * Sends one request. A string or Uint8Array body is sent as is; any other defined body is sent as
 * JSON. `content-type: application/json` is set for bodies unless the caller overrides it (a
 * `content-type` of '' sends none at all).
 */
export async function request(
  baseUrl: string,
  token: string | undefined,
  method: string,
  path: string,
  body?: Body,
  opts: RequestOptions = {},
): Promise<ApiResponse> {
  const headers: Record<string, string> = {};
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  let payload: string | Uint8Array | undefined;
  if (body !== undefined) {
    payload = typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body);
    headers['content-type'] = 'application/json';
  }
  for (const [k, v] of Object.entries(opts.headers ?? {})) headers[k.toLowerCase()] = v;
  if (headers['content-type'] === '') {
    // fetch labels a string body text/plain; a byte body goes out without any content type.
    delete headers['content-type'];
    if (typeof payload === 'string') payload = Buffer.from(payload);
  }
  const init = { method, headers, ...(payload !== undefined ? { body: payload } : {}) };
  // A kept-alive connection the server closed just as this request went out on it (uWS closes
  // one idle for 10 s; a starved test process may not have seen the close yet), reset before any
  // answer: an idempotent request is sent again, as HTTP lets a client do (RFC 9112, "Retrying
  // Requests"); the API's POSTs are idempotent by their operationId. A retry met another
  // connection closed in the same lull once, so each waits a moment first, for the pool to take
  // in the other closes; a server that is gone still fails the request (refused).
  let res: Response | undefined;
  for (let attempt = 1; !res; attempt++) {
    try {
      res = await fetch(baseUrl + path, init);
    } catch (err) {
      if (attempt === 3 || !connectionReset(err) || !idempotent(method, payload)) throw err;
      await new Promise((r) => setTimeout(r, 50 * attempt));
    }
  }
  return toResponse(res);
}

function connectionReset(err: unknown): boolean {
  const code = (err as { cause?: { code?: string } }).cause?.code;
  return code === 'ECONNRESET' || code === 'UND_ERR_SOCKET';
}

function idempotent(method: string, payload: string | Uint8Array | undefined): boolean {
  if (method.toUpperCase() !== 'POST') return true;
  return typeof payload === 'string' && payload.includes('"operationId"');
}

export interface Api {
  get(path: string, opts?: RequestOptions): Promise<ApiResponse>;
  post(path: string, body?: Body, opts?: RequestOptions): Promise<ApiResponse>;
  put(path: string, body?: Body, opts?: RequestOptions): Promise<ApiResponse>;
  del(path: string, opts?: RequestOptions): Promise<ApiResponse>;
  request(method: string, path: string, body?: Body, opts?: RequestOptions): Promise<ApiResponse>;
}

/** A client for one server and one session token (none: no Authorization header). */
export function api(baseUrl: string, token?: string): Api {
  return {
    get: (path, opts) => request(baseUrl, token, 'GET', path, undefined, opts),
    post: (path, body, opts) => request(baseUrl, token, 'POST', path, body, opts),
    put: (path, body, opts) => request(baseUrl, token, 'PUT', path, body, opts),
    del: (path, opts) => request(baseUrl, token, 'DELETE', path, undefined, opts),
    request: (method, path, body, opts) => request(baseUrl, token, method, path, body, opts),
  };
}

/**
 * Sends one raw HTTP/1.1 request text over a new TCP connection (written in one piece, so a
 * server that answers early and closes cannot break the write half-way) and reads the response
 * until the server closes or the declared body has arrived.
 */
export async function rawRequest(baseUrl: string, head: string, body: Buffer | string = ''): Promise<ApiResponse> {
  const target = new URL(baseUrl);
  const bytes = Buffer.concat([Buffer.from(head), Buffer.from(body)]);
  const raw = await new Promise<Buffer>((res, rej) => {
    const chunks: Buffer[] = [];
    const socket = connect(Number(target.port), target.hostname, () => socket.write(bytes));
    const done = () => {
      socket.destroy();
      res(Buffer.concat(chunks));
    };
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      const all = Buffer.concat(chunks);
      const split = all.indexOf('\r\n\r\n');
      if (split < 0) return;
      const m = /\r\ncontent-length:\s*(\d+)/i.exec(all.subarray(0, split).toString('latin1'));
      if (m && all.length >= split + 4 + Number(m[1])) done();
    });
    socket.on('end', done);
    socket.on('error', (err) => (chunks.length ? done() : rej(err)));
    socket.setTimeout(5000, () => rej(new Error('raw request timed out')));
  });
  const split = raw.indexOf('\r\n\r\n');
  const [statusLine = '', ...headerLines] = raw.subarray(0, split).toString('latin1').split('\r\n');
  const headers = new Headers();
  for (const line of headerLines) {
    const i = line.indexOf(':');
    if (i > 0) headers.append(line.slice(0, i).trim(), line.slice(i + 1).trim());
  }
  const text = raw.subarray(split + 4).toString('utf8');
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: Number(statusLine.split(' ')[1]), headers, text, json };
}
