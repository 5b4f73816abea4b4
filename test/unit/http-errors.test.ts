import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ApiError, errorCatalogue, errors, problemBody, PROBLEM_TYPE_BASE, problemReply, type ErrorCode } from '../../src/commands/errors.js';

/** src/commands/errors.ts: the error catalogue (docs/api.md "Errors") and RFC 9457 bodies. */

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

  it('adds only method_not_allowed (405), call_not_active (409, docs/api.md "In-call messages"), group_call_full (409, docs/group-calls.md), not_in_call (409, docs/protocol.md "Moving a call") and sfu_unavailable (503, docs/api.md "Media session") beyond the original design', () => {
    const extra = Object.keys(errorCatalogue).filter((c) => !(c in DOCUMENTED_STATUSES));
    expect(extra.sort()).toEqual(['call_not_active', 'group_call_full', 'method_not_allowed', 'not_in_call', 'sfu_unavailable']);
    expect(errorCatalogue.not_in_call.status).toBe(409);
    expect(errorCatalogue.group_call_full.status).toBe(409);
    expect(errorCatalogue.method_not_allowed.status).toBe(405);
    expect(errorCatalogue.call_not_active.status).toBe(409);
    expect(errorCatalogue.sfu_unavailable.status).toBe(503);
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

describe('named constructors', () => {
  const SRC = new URL('../../src/', import.meta.url);
  const files = (dir: URL): URL[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(new URL(`${e.name}/`, dir)) : e.name.endsWith('.ts') ? [new URL(e.name, dir)] : []));

  it('build every error: no module but the catalogue calls new ApiError', () => {
    const callers = files(SRC)
      .filter((f) => !f.pathname.endsWith('/src/commands/errors.ts'))
      .filter((f) => readFileSync(f, 'utf8').includes('new ApiError('))
      .map((f) => f.pathname.split('/src/')[1]);
    expect(callers).toEqual([]);
  });

  it('cover every code of the catalogue', () => {
    const source = readFileSync(new URL('commands/errors.ts', SRC), 'utf8');
    const built = new Set([...source.matchAll(/new ApiError\(\s*'([a-z_]+)'/g)].map((m) => m[1]));
    expect([...built].sort()).toEqual(Object.keys(errorCatalogue).sort());
  });

  it('carry the fixed parts of a refusal: headers and extra members', () => {
    expect(errors.rateLimited('slow down', 1_500).headers).toEqual({ 'retry-after': '2' });
    expect(errors.unauthorized('no').headers).toEqual({ 'www-authenticate': 'Bearer' });
    expect(errors.methodNotAllowed('put', '/v1/calls', 'POST').detail).toBe('PUT is not allowed on /v1/calls; allowed: POST');
    expect(errors.callNotFound()).toMatchObject({ code: 'not_found', status: 404, detail: 'call not found' });
  });
});
