import { randomUUID } from 'node:crypto';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { ApiError, problemBody } from './errors.js';
import { clientAddress } from './clientAddress.js';
import type { ClientAddress } from '../auth/guard.js';
import { corsResponseHeaders, originAllowed, preflightHeaders, type CorsOrigins } from './cors.js';

/**
 * The one layer that touches raw uWS HTTP objects. It copies what handlers need from `req`
 * synchronously (it dies after the callback), attaches onAborted first, copies body chunks and
 * enforces the body limit while reading, and writes every response corked and only when the
 * client is still there. Endpoint modules see only `RequestContext` and return a `Reply`.
 */

export type Method = 'get' | 'post' | 'put' | 'del';

export interface RequestContext {
  method: string;
  path: string;
  /** Raw query string (after `?`). */
  query: string;
  params: string[];
  authorization: string;
  /** The client's W3C `traceparent` header ('' when absent): the parent of the request's span. */
  traceparent: string;
  contentType: string;
  requestId: string;
  /** The Origin header ('' when absent): browsers send it cross-origin. */
  origin: string;
  /** The client's address, read when first asked for (clientAddress.ts). */
  remoteAddress: ClientAddress;
  body: Buffer | undefined;
}

export interface Reply {
  status: number;
  /** A JSON text (already serialised), or undefined for no body. */
  body?: string;
  contentType?: string;
  headers?: Record<string, string>;
}

export type Handler = (ctx: RequestContext) => Promise<Reply> | Reply;

export interface Route {
  method: Method;
  pattern: string;
  handler: Handler;
  /** A larger body limit for this route than RouterOptions.bodyLimitBytes (the larger of the two applies). */
  bodyLimitBytes?: number;
}

export interface RouterOptions {
  bodyLimitBytes: number;
  /** Called for every finished request (metrics, logs). */
  onResponse?: (ctx: RequestContext, route: string, status: number, startedAt: number) => void;
  /** Called for unexpected errors (the client gets a bare 500). */
  onError: (err: unknown, ctx: RequestContext) => void;
  /** Maps an error thrown by a handler to an ApiError when it knows it (e.g. Redis down). */
  classifyError?: (err: unknown) => ApiError | undefined;
  /** CLIENT_IP_HEADER: where the client address is when behind a proxy. */
  clientIpHeader?: string | undefined;
  /** Requests being handled right now (graceful shutdown waits for it to reach 0). */
  inFlight?: { count: number };
  /** CORS_ORIGINS: browser origins allowed (docs/api.md "CORS"); undefined: no CORS headers. */
  cors?: CorsOrigins | undefined;
}

const STATUS_TEXT: Record<number, string> = {
  200: '200 OK',
  201: '201 Created',
  202: '202 Accepted',
  204: '204 No Content',
  302: '302 Found',
  400: '400 Bad Request',
  401: '401 Unauthorized',
  403: '403 Forbidden',
  404: '404 Not Found',
  405: '405 Method Not Allowed',
  409: '409 Conflict',
  413: '413 Payload Too Large',
  415: '415 Unsupported Media Type',
  429: '429 Too Many Requests',
  500: '500 Internal Server Error',
  503: '503 Service Unavailable',
};

function statusLine(status: number): string {
  return STATUS_TEXT[status] ?? `${status} Status`;
}

const METHOD_NAME: Record<Method, string> = { get: 'GET', post: 'POST', put: 'PUT', del: 'DELETE' };

interface ResponseState {
  aborted: boolean;
  done: boolean;
}

function send(res: HttpResponse, state: ResponseState, ctx: Pick<RequestContext, 'requestId' | 'origin'>, reply: Reply, cors: CorsOrigins | undefined, closeConnection = false): void {
  if (state.aborted || state.done) return;
  state.done = true;
  res.cork(() => {
    res.writeStatus(statusLine(reply.status));
    res.writeHeader('x-request-id', ctx.requestId);
    // Every response, errors included, carries the CORS headers: a browser script can then read
    // a 429's retry-after or a 500's request ID.
    for (const [k, v] of Object.entries(corsResponseHeaders(cors, ctx.origin))) res.writeHeader(k, v);
    if (reply.body !== undefined) res.writeHeader('content-type', reply.contentType ?? 'application/json');
    for (const [k, v] of Object.entries(reply.headers ?? {})) res.writeHeader(k, v);
    if (reply.body === undefined) res.endWithoutBody(0, closeConnection);
    else res.end(reply.body, closeConnection);
  });
}

export function problemReply(err: ApiError): Reply {
  return { status: err.status, body: problemBody(err), contentType: 'application/problem+json', headers: err.headers };
}

/**
 * Answers with a problem outside mountRoutes (the WebSocket upgrade refusal), the same way as
 * every route does: status line, `x-request-id`, problem+json. The caller checks it was not aborted.
 */
export function writeProblem(res: HttpResponse, ctx: Pick<RequestContext, 'requestId' | 'origin'>, err: ApiError, cors?: CorsOrigins): void {
  send(res, { aborted: false, done: false }, ctx, problemReply(err), cors);
}

/** The client's `x-request-id` when it is sane, else a new one. */
export function requestIdOf(req: HttpRequest): string {
  const incomingId = req.getHeader('x-request-id');
  return /^[A-Za-z0-9._:-]{1,128}$/.test(incomingId) ? incomingId : randomUUID();
}

function captureContext(res: HttpResponse, req: HttpRequest, paramCount: number, state: ResponseState, clientIpHeader?: string): RequestContext {
  const params: string[] = [];
  for (let i = 0; i < paramCount; i++) params.push(req.getParameter(i) ?? '');
  return {
    method: req.getMethod(),
    path: req.getUrl(),
    query: req.getQuery() ?? '',
    params,
    authorization: req.getHeader('authorization'),
    traceparent: req.getHeader('traceparent'),
    contentType: req.getHeader('content-type'),
    requestId: requestIdOf(req),
    origin: req.getHeader('origin'),
    remoteAddress: clientAddress(res, req, clientIpHeader, () => state.aborted || state.done),
    body: undefined,
  };
}

/** Reads the body, enforcing the limit while reading; calls `done` with it or with an error. */
function readBody(res: HttpResponse, declaredLength: number, limit: number, done: (body: Buffer | ApiError) => void): void {
  if (declaredLength > limit) {
    done(new ApiError('payload_too_large', `request body is ${declaredLength} bytes; the limit is ${limit}`));
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let finished = false;
  res.onData((chunk, isLast) => {
    if (finished) return;
    size += chunk.byteLength;
    if (size > limit) {
      finished = true;
      done(new ApiError('payload_too_large', `request body exceeds the limit of ${limit} bytes`));
      return;
    }
    // uWS frees the chunk after this callback: copy it.
    chunks.push(Buffer.from(new Uint8Array(chunk.slice(0))));
    if (isLast) {
      finished = true;
      done(Buffer.concat(chunks, size));
    }
  });
}

export function mountRoutes(app: TemplatedApp, routes: Route[], opts: RouterOptions): void {
  const byPattern = new Map<string, Route[]>();
  for (const r of routes) byPattern.set(r.pattern, [...(byPattern.get(r.pattern) ?? []), r]);

  for (const route of routes) {
    const paramCount = (route.pattern.match(/:/g) ?? []).length;
    const hasBody = route.method === 'post' || route.method === 'put';
    app[route.method](route.pattern, (res, req) => {
      const startedAt = performance.now();
      const state: ResponseState = { aborted: false, done: false };
      // Counted in flight until answered, or until the client goes away before its handler
      // started (an abandoned upload never completes its body: it must not hold up shutdown).
      let counted = false;
      let handlerStarted = false;
      const release = () => {
        if (counted && opts.inFlight) opts.inFlight.count--;
        counted = false;
      };
      res.onAborted(() => {
        state.aborted = true;
        if (!handlerStarted) release();
      });
      const ctx = captureContext(res, req, paramCount, state, opts.clientIpHeader);
      const declared = Number(req.getHeader('content-length') || '0');
      if (opts.inFlight) {
        opts.inFlight.count++;
        counted = true;
      }
      const finish = (reply: Reply, closeConnection = false) => {
        release();
        send(res, state, ctx, reply, opts.cors, closeConnection);
        opts.onResponse?.(ctx, route.pattern, reply.status, startedAt);
      };
      const run = () => {
        handlerStarted = true;
        let result: Promise<Reply> | Reply;
        try {
          result = route.handler(ctx);
        } catch (err) {
          finish(errorReply(err, ctx, opts));
          return;
        }
        if (result instanceof Promise) {
          result.then(finish, (err: unknown) => finish(errorReply(err, ctx, opts)));
        } else {
          finish(result);
        }
      };
      if (!hasBody) {
        run();
        return;
      }
      readBody(res, declared, Math.max(route.bodyLimitBytes ?? 0, opts.bodyLimitBytes), (body) => {
        if (body instanceof ApiError) {
          // Stop reading an oversized upload: answer and close the connection.
          finish(problemReply(body), true);
          return;
        }
        ctx.body = body;
        run();
      });
    });
  }

  // With CORS_ORIGINS set, a preflight for a known path: 204 for a listed origin (403 otherwise).
  // Without it, OPTIONS is one more method the path does not allow (405 below).
  const cors = opts.cors;
  if (cors) {
    for (const [pattern, list] of byPattern) {
      const allow = list.map((r) => METHOD_NAME[r.method]).join(', ');
      app.options(
        pattern,
        answerAtOnce(cors, (ctx) => {
          if (!ctx.origin || !originAllowed(cors, ctx.origin)) {
            return problemReply(new ApiError('forbidden', `origin "${ctx.origin}" is not allowed (CORS_ORIGINS)`));
          }
          return { status: 204, headers: { allow, ...preflightHeaders(allow) } };
        }),
      );
    }
  }

  // A known path with another method: 405 with the methods it does allow.
  for (const [pattern, list] of byPattern) {
    const allow = list.map((r) => METHOD_NAME[r.method]).join(', ');
    app.any(
      pattern,
      answerAtOnce(cors, (ctx) =>
        problemReply(new ApiError('method_not_allowed', `${ctx.method.toUpperCase()} is not allowed on ${ctx.path}; allowed: ${allow}`, {}, { allow })),
      ),
    );
  }
}

/** The catch-all 404; mount it last. */
export function mountNotFound(app: TemplatedApp, cors?: CorsOrigins): void {
  app.any('/*', answerAtOnce(cors, (ctx) => problemReply(new ApiError('not_found', `no route for ${ctx.method.toUpperCase()} ${ctx.path}`))));
}

/** A uWS handler that answers from the request line and headers alone (preflight, 405, 404). */
function answerAtOnce(cors: CorsOrigins | undefined, reply: (ctx: RequestContext) => Reply): (res: HttpResponse, req: HttpRequest) => void {
  return (res, req) => {
    const state: ResponseState = { aborted: false, done: false };
    res.onAborted(() => {
      state.aborted = true;
    });
    const ctx = captureContext(res, req, 0, state);
    send(res, state, ctx, reply(ctx), cors);
  };
}

function errorReply(err: unknown, ctx: RequestContext, opts: RouterOptions): Reply {
  if (err instanceof ApiError) return problemReply(err);
  const classified = opts.classifyError?.(err);
  if (classified) return problemReply(classified);
  opts.onError(err, ctx);
  return problemReply(new ApiError('internal', `internal error; request ${ctx.requestId}`));
}
