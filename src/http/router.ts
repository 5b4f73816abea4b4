import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { ApiError, errors, problemReply } from '../commands/errors.js';
import type { Reply } from '../commands/command.js';
import { clientAddress } from '../transport/clientAddress.js';
import type { ClientAddress } from '../auth/guard.js';
import { preflightHeaders } from '../transport/cors.js';
import { originAllowed, type CorsOrigins } from '../config/cors.js';
import { requestIdOf, send, type ResponseState } from '../transport/response.js';

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

const METHOD_NAME: Record<Method, string> = { get: 'GET', post: 'POST', put: 'PUT', del: 'DELETE' };

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
    done(errors.payloadTooLarge(`request body is ${declaredLength} bytes; the limit is ${limit}`));
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
      done(errors.payloadTooLarge(`request body exceeds the limit of ${limit} bytes`));
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
            return problemReply(errors.forbidden(`origin "${ctx.origin}" is not allowed (CORS_ORIGINS)`));
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
        problemReply(errors.methodNotAllowed(ctx.method, ctx.path, allow)),
      ),
    );
  }
}

/** The catch-all 404; mount it last. */
export function mountNotFound(app: TemplatedApp, cors?: CorsOrigins): void {
  app.any('/*', answerAtOnce(cors, (ctx) => problemReply(errors.notFound(`no route for ${ctx.method.toUpperCase()} ${ctx.path}`))));
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
  return problemReply(errors.internal(`internal error; request ${ctx.requestId}`));
}
