import type { z } from 'zod';
import type { GuardResult } from '../auth/guard.js';
import type { CallSnapshot } from '../calls/snapshot.js';
import { isRedisUnavailable } from '../redis/connection.js';
import type { Reply } from './command.js';

/**
 * The one catalogue of error codes: each has its HTTP status and title. Responses are RFC 9457
 * problem details (`application/problem+json`): { type, title, status, detail, code, ...extra }.
 * `when` is the row of docs/api.md "Errors", which `npm run docs` writes from this catalogue
 * (src/contracts/docTables.ts).
 */
export const errorCatalogue = {
  invalid_request: { status: 400, title: 'Invalid request', when: 'invalid JSON, wrong types, missing fields, calling yourself, a `title` on a one-to-one create, bad path parameter' },
  unauthorized: { status: 401, title: 'Unauthorized', when: 'missing or invalid token' },
  forbidden: { status: 403, title: 'Forbidden', when: "installationId is not the session's; the caller answering; media before accept" },
  not_found: { status: 404, title: 'Not found', when: 'unknown route; unknown call, or not a party of it (a stranger inviting into a group call too: whether the call exists is not told)' },
  method_not_allowed: { status: 405, title: 'Method not allowed', when: 'known path, other method (`allow` header lists the methods)' },
  answer_conflict: { status: 409, title: 'Call answered elsewhere', when: 'another installation won, or the call is no longer ringing (`snapshot`)' },
  idempotency_conflict: { status: 409, title: 'Operation ID reused with a different request', when: 'operationId reused with a different request' },
  revision_conflict: { status: 409, title: 'Revision does not match', when: '`expectedRevision` does not match (`snapshot`)' },
  call_exists: { status: 409, title: 'Call ID already used', when: 'callId already used' },
  not_in_call: { status: 409, title: 'Not in the call', when: 'a move of a call that is not accepted, or by a user who is not in it (`snapshot`: [Moving a call](protocol.md#moving-a-call))' },
  call_not_active: { status: 409, title: 'Call is not ringing or accepted', when: 'an in-call message, or an invitation into a group call, after the call ended' },
  group_call_full: { status: 409, title: 'Group call is full', when: 'an invitation that would take a group call past `GROUP_CALL_MAX_MEMBERS` members besides its caller ([group calls](group-calls.md))' },
  payload_too_large: { status: 413, title: 'Payload too large', when: 'body over `BODY_LIMIT_BYTES`' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type', when: 'body not `application/json`' },
  rate_limited: { status: 429, title: 'Too many requests', when: 'an abuse limit (`retry-after`)' },
  internal: { status: 500, title: 'Internal server error', when: 'a bug; nothing internal is leaked' },
  unavailable: { status: 503, title: 'Service unavailable', when: 'Redis unreachable (`retry-after`)' },
  sfu_unavailable: { status: 503, title: 'SFU unavailable', when: "`media-session` when the call's SFU is unreachable or refused (`retry-after`), or a group call on a server with no SFU; the call goes on ([Media session](#media-session))" },
} as const satisfies Record<string, { status: number; title: string; when: string }>;

export type ErrorCode = keyof typeof errorCatalogue;

export const PROBLEM_TYPE_BASE = 'https://calling-backend.dev/problems/';

export class ApiError extends Error {
  override name = 'ApiError';
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    readonly detail: string,
    /** Extra members of the problem body (e.g. `snapshot`). */
    readonly extra: Record<string, unknown> = {},
    /** Extra response headers (e.g. `retry-after`, `allow`). */
    readonly headers: Record<string, string> = {},
  ) {
    super(`${code}: ${detail}`);
    this.status = errorCatalogue[code].status;
  }
}

/**
 * One named constructor per code (the style of fastify's lib/errors.js): a call site says which
 * refusal it is and gives only the detail that depends on the request; every fixed detail,
 * header and extra member is written here once. Nothing outside this file calls `new ApiError`
 * (test/unit/http-errors.test.ts).
 */
export const errors = {
  invalidRequest: (detail: string) => new ApiError('invalid_request', detail),
  /** The body or parameter failed its schema: every offending field, named. */
  invalidFields: (issues: readonly z.core.$ZodIssue[]) => new ApiError('invalid_request', describeIssues(issues)),
  badCursor: () => new ApiError('invalid_request', 'cursor: not a cursor issued by this server'),
  unauthorized: (detail: string) => new ApiError('unauthorized', detail, {}, { 'www-authenticate': 'Bearer' }),
  forbidden: (detail: string) => new ApiError('forbidden', detail),
  notFound: (detail: string) => new ApiError('not_found', detail),
  /** A call that does not exist, or that the caller is not a party of (not told apart, docs/api.md "Errors"). */
  callNotFound: () => new ApiError('not_found', 'call not found'),
  methodNotAllowed: (method: string, path: string, allow: string) =>
    new ApiError('method_not_allowed', `${method.toUpperCase()} is not allowed on ${path}; allowed: ${allow}`, {}, { allow }),
  answerConflict: (snapshot: CallSnapshot) =>
    new ApiError(
      'answer_conflict',
      snapshot.state === 'accepted' ? 'the call was answered by another installation' : `the call is ${snapshot.state} and can no longer be answered`,
      { snapshot },
    ),
  idempotencyConflict: () => new ApiError('idempotency_conflict', 'this operationId was already used with a different request'),
  revisionConflict: (snapshot: CallSnapshot) =>
    new ApiError('revision_conflict', `expectedRevision does not match the call's revision ${snapshot.revision}`, { snapshot }),
  notInCall: (snapshot: CallSnapshot) =>
    new ApiError('not_in_call', snapshot.state === 'accepted' ? 'you are not in this call: only a member in it moves it' : `the call is ${snapshot.state}: only an accepted call moves`, { snapshot }),
  callExists: () => new ApiError('call_exists', 'this callId is already used by another call'),
  callNotActive: (what = 'messages can only be sent') => new ApiError('call_not_active', `the call has ended; ${what} while it rings or is accepted`),
  groupCallFull: () => new ApiError('group_call_full', 'a group call holds at most GROUP_CALL_MAX_MEMBERS members besides its caller'),
  notGroupCall: () => new ApiError('invalid_request', 'this is a one-to-one call: members can only be invited into a group call'),
  payloadTooLarge: (detail: string) => new ApiError('payload_too_large', detail),
  unsupportedMediaType: (contentType: string) =>
    new ApiError('unsupported_media_type', `content-type must be application/json, got "${contentType || '(none)'}"`),
  /** 429 with `retry-after` in whole seconds (at least 1). */
  rateLimited: (detail: string, retryAfterMs: number) =>
    new ApiError('rate_limited', detail, {}, { 'retry-after': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) }),
  internal: (detail = 'internal error') => new ApiError('internal', detail),
  unavailable: (detail = 'the call store is unreachable; retry later') => new ApiError('unavailable', detail, {}, { 'retry-after': '1' }),
  /** The call's SFU is down or refused: the call itself goes on (docs/api.md "Media session"). */
  sfuUnavailable: () => new ApiError('sfu_unavailable', "the call's media server is unreachable; the call goes on, retry media-session later", {}, { 'retry-after': '2' }),
  /** A group call on a server with no SFU configured: retrying does not help (docs/group-calls.md "Media"). */
  noSfu: () => new ApiError('sfu_unavailable', 'group calls need an SFU and this server has none configured (docs/operations.md "SFU media"); the call goes on'),
} as const;

/** The refusal of a session token the guard did not accept (auth/guard.ts), the same on both transports. */
export function tokenRefusal(failure: Extract<GuardResult, { ok: false }>): ApiError {
  switch (failure.kind) {
    case 'rate_limited':
      return errors.rateLimited('too many failed authentications from this address', failure.retryAfterMs);
    case 'forbidden':
      return errors.forbidden(failure.detail);
    case 'unauthorized':
      return errors.unauthorized(failure.detail);
  }
}

/** The refusal for an error that is Redis being unreachable (503, retry-after); undefined for any other. */
export function unavailableError(err: unknown): ApiError | undefined {
  return isRedisUnavailable(err) ? errors.unavailable() : undefined;
}

export function problemBody(err: ApiError): string {
  return JSON.stringify({
    type: PROBLEM_TYPE_BASE + err.code,
    title: errorCatalogue[err.code].title,
    status: err.status,
    detail: err.detail,
    code: err.code,
    ...err.extra,
  });
}

export function problemReply(err: ApiError): Reply {
  return { status: err.status, body: problemBody(err), contentType: 'application/problem+json', headers: err.headers };
}

/** Formats zod issues as `field: message; field: message`. */
export function describeIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .map((i) => `${i.path.length ? i.path.join('.') : 'body'}: ${i.message}`)
    .join('; ');
}
