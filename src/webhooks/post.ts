import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

/**
 * One POST to a webhook receiver over node:http(s) with kept-alive connections. Not fetch: its
 * streams cost several times the CPU of a plain request, and the worker sends one request per
 * event and endpoint (docs/performance.md "What bounds each").
 */
export interface PostResult {
  status: number;
  headers: IncomingHttpHeaders;
}

export class TimeoutError extends Error {
  override name = 'TimeoutError';
}

const agents = { http: new HttpAgent({ keepAlive: true, maxSockets: 256 }), https: new HttpsAgent({ keepAlive: true, maxSockets: 256 }) };

/** POSTs `body`; resolves with the status once the answer is read, rejects on a network error or after `timeoutMs`. */
export function post(url: URL, headers: Record<string, string>, body: string, timeoutMs: number): Promise<PostResult> {
  const https = url.protocol === 'https:';
  return new Promise((resolve, reject) => {
    const req = (https ? httpsRequest : httpRequest)(
      url,
      { method: 'POST', agent: https ? agents.https : agents.http, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } },
      (res) => {
        // The body is not needed; reading it lets the connection be reused.
        res.resume();
        res.on('end', () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, headers: res.headers });
        });
        res.on('error', fail);
      },
    );
    const timer = setTimeout(() => {
      req.destroy(new TimeoutError(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    function fail(err: Error) {
      clearTimeout(timer);
      reject(err);
    }
    req.on('error', fail);
    req.end(body);
  });
}
