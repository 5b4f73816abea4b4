import { isRedisUnavailable } from '../redis/connection.js';

/**
 * The one catalogue of error codes: each has its HTTP status and title. Responses are RFC 9457
 * problem details (`application/problem+json`): { type, title, status, detail, code, ...extra }.
 * docs/api.md ("Errors") lists the same codes; a test keeps the two in agreement.
 */
export const errorCatalogue = {
  invalid_request: { status: 400, title: 'Invalid request' },
  unauthorized: { status: 401, title: 'Unauthorized' },
  forbidden: { status: 403, title: 'Forbidden' },
  not_found: { status: 404, title: 'Not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  answer_conflict: { status: 409, title: 'Call answered elsewhere' },
  idempotency_conflict: { status: 409, title: 'Operation ID reused with a different request' },
  revision_conflict: { status: 409, title: 'Revision does not match' },
  call_exists: { status: 409, title: 'Call ID already used' },
  call_not_active: { status: 409, title: 'Call is not ringing or accepted' },
  payload_too_large: { status: 413, title: 'Payload too large' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  rate_limited: { status: 429, title: 'Too many requests' },
  internal: { status: 500, title: 'Internal server error' },
  unavailable: { status: 503, title: 'Service unavailable' },
} as const satisfies Record<string, { status: number; title: string }>;

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

/** The refusal for an error that is Redis being unreachable (503, retry-after); undefined for any other. */
export function unavailableError(err: unknown): ApiError | undefined {
  return isRedisUnavailable(err) ? new ApiError('unavailable', 'the call store is unreachable; retry later', {}, { 'retry-after': '1' }) : undefined;
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
