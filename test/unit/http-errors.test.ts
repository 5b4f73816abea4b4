import { describe, expect, it } from 'vitest';
import { ApiError, errorCatalogue, problemBody, PROBLEM_TYPE_BASE, type ErrorCode } from '../../src/http/errors.js';
import { problemReply } from '../../src/http/router.js';

/** src/http/errors.ts: the error catalogue (docs/api.md "Errors") and RFC 9457 bodies. */

/** docs/api.md "Errors"'s codes and statuses, written out here rather than read from the code under test. */
const DOCUMENTED_STATUSES: Record<string, number> = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  answer_conflict: 409,
  idempotency_conflict: 409,
  revision_conflict: 409,
  call_exists: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  unavailable: 503,
  internal: 500,
};

describe('errorCatalogue', () => {
  it('has every code docs/api.md "Errors" lists, with its status', () => {
    for (const [code, status] of Object.entries(DOCUMENTED_STATUSES)) {
      expect(errorCatalogue[code as ErrorCode]?.status, code).toBe(status);
    }
  });

  it('adds only method_not_allowed (405) and call_not_active (409, docs/api.md "In-call messages") beyond the original design', () => {
    const extra = Object.keys(errorCatalogue).filter((c) => !(c in DOCUMENTED_STATUSES));
    expect(extra.sort()).toEqual(['call_not_active', 'method_not_allowed']);
    expect(errorCatalogue.method_not_allowed.status).toBe(405);
    expect(errorCatalogue.call_not_active.status).toBe(409);
  });

  it('gives every code a non-empty title and a distinct one', () => {
    const titles = Object.values(errorCatalogue).map((e) => e.title);
    for (const t of titles) expect(t.trim().length).toBeGreaterThan(0);
    expect(new Set(titles).size).toBe(titles.length);
  });
});

describe('ApiError', () => {
  it('takes its status from the catalogue', () => {
    for (const code of Object.keys(errorCatalogue) as ErrorCode[]) {
      const e = new ApiError(code, 'detail');
      expect(e.status).toBe(errorCatalogue[code].status);
      expect(e.code).toBe(code);
      expect(e).toBeInstanceOf(Error);
      expect(e.name).toBe('ApiError');
      expect(e.message).toBe(`${code}: detail`);
      expect(e.extra).toEqual({});
      expect(e.headers).toEqual({});
    }
  });
});

describe('problemBody / problemReply', () => {
  it('renders { type, title, status, detail, code } in that order', () => {
    const body = problemBody(new ApiError('invalid_request', 'callId: must be 1 to 128 characters'));
    expect(body).toBe(
      JSON.stringify({
        type: `${PROBLEM_TYPE_BASE}invalid_request`,
        title: 'Invalid request',
        status: 400,
        detail: 'callId: must be 1 to 128 characters',
        code: 'invalid_request',
      }),
    );
    expect(PROBLEM_TYPE_BASE).toMatch(/^https:\/\/[^\s]+\/$/);
  });

  it('appends extra members (e.g. the snapshot of a conflict) after the standard ones', () => {
    const snapshot = { callId: 'c', state: 'accepted' };
    const parsed = JSON.parse(problemBody(new ApiError('answer_conflict', 'lost', { snapshot })));
    expect(Object.keys(parsed)).toEqual(['type', 'title', 'status', 'detail', 'code', 'snapshot']);
    expect(parsed.snapshot).toEqual(snapshot);
    expect(parsed.status).toBe(409);
  });

  it('problemReply: the status, application/problem+json, and the error’s headers', () => {
    const reply = problemReply(new ApiError('unavailable', 'later', {}, { 'retry-after': '1' }));
    expect(reply).toEqual({
      status: 503,
      body: problemBody(new ApiError('unavailable', 'later')),
      contentType: 'application/problem+json',
      headers: { 'retry-after': '1' },
    });
  });
});
