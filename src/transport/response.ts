import { randomUUID } from 'node:crypto';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import type { CorsOrigins } from '../config/cors.js';
import type { Reply } from '../commands/command.js';
import { problemReply, type ApiError } from '../commands/errors.js';
import { corsResponseHeaders } from './cors.js';

/**
 * Writing a uWS HTTP response, for both transports: the router's replies and the signaling
 * upgrade's refusals go out the same way (status line, `x-request-id`, CORS headers, corked, and
 * only while the client is there).
 */

/** What a response needs from its request. */
export interface ResponseContext {
  requestId: string;
  /** The Origin header ('' when absent). */
  origin: string;
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

export interface ResponseState {
  aborted: boolean;
  done: boolean;
}

export function send(res: HttpResponse, state: ResponseState, ctx: ResponseContext, reply: Reply, cors: CorsOrigins | undefined, closeConnection = false): void {
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

/**
 * Answers with a problem outside mountRoutes (the WebSocket upgrade refusal), the same way as
 * every route does: status line, `x-request-id`, problem+json. The caller checks it was not aborted.
 */
export function writeProblem(res: HttpResponse, ctx: ResponseContext, err: ApiError, cors?: CorsOrigins): void {
  send(res, { aborted: false, done: false }, ctx, problemReply(err), cors);
}

/** The client's `x-request-id` when it is sane, else a new one. */
export function requestIdOf(req: HttpRequest): string {
  const incomingId = req.getHeader('x-request-id');
  return /^[A-Za-z0-9._:-]{1,128}$/.test(incomingId) ? incomingId : randomUUID();
}

