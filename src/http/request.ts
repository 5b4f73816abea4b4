import { z } from 'zod';
import { decodeIndexCursor, type IndexCursor } from '../redis/indexedRecords.js';
import { errors, tokenRefusal } from '../commands/errors.js';
import type { RequestContext } from './router.js';
import { bearerToken } from '../auth/verifier.js';
import type { Principal } from '../auth/principal.js';
import { checkToken, type AuthGuard } from '../auth/guard.js';

/** Verifies the bearer token of a request; 401 with a precise detail, or 429 for an address over its failure limit. */
export async function authenticate(ctx: RequestContext, guard: AuthGuard): Promise<Principal> {
  if (ctx.authorization === '') throw errors.unauthorized('missing Authorization header; send "Authorization: Bearer <token>"');
  const token = bearerToken(ctx.authorization);
  if (!token) throw errors.unauthorized('Authorization header must use the Bearer scheme');
  const result = await checkToken(guard, token, ctx.remoteAddress);
  if (result.ok) return result.principal;
  throw tokenRefusal(result);
}

/**
 * Parses a JSON request body against a schema. Wrong content type → 415; empty, invalid JSON or
 * a value that is not an object → 400; schema violations → 400 naming every offending field.
 * With `optional`, an empty body counts as `{}`.
 */
export function parseJsonBody<S extends z.ZodType>(ctx: RequestContext, schema: S, optional = false): z.output<S> {
  const body = ctx.body;
  let value: unknown = {};
  if (body && body.length > 0) {
    const type = ctx.contentType.split(';')[0]?.trim().toLowerCase();
    if (type !== 'application/json') {
      throw errors.unsupportedMediaType(ctx.contentType);
    }
    try {
      value = JSON.parse(body.toString('utf8'));
    } catch (err) {
      throw errors.invalidRequest(`request body is not valid JSON: ${(err as Error).message}`);
    }
  } else if (!optional) {
    throw errors.invalidRequest('request body is required (a JSON object)');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw errors.invalidRequest('request body must be a JSON object');
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw errors.invalidFields(parsed.error.issues);
  return parsed.data;
}

/** Validates one path parameter against a schema; 400 naming the parameter otherwise. */
export function parseParam<S extends z.ZodType>(name: string, raw: string, schema: S): z.output<S> {
  let decoded: string;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    throw errors.invalidRequest(`path parameter ${name} is not valid percent-encoding`);
  }
  const parsed = schema.safeParse(decoded);
  if (!parsed.success) throw errors.invalidRequest(`path parameter ${name}: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
  return parsed.data;
}

const pageLimit = z.coerce.number().int().min(1).max(200);

/**
 * A page request from the query: `cursor` (opaque, from the last page) and `limit` (1–200,
 * default 50). Call history and webhook dead letters are read this way.
 */
export function pageQuery(ctx: RequestContext): { q: URLSearchParams; cursor: IndexCursor | undefined; limit: number } {
  const q = new URLSearchParams(ctx.query);
  const rawCursor = q.get('cursor');
  const cursor = rawCursor ? decodeIndexCursor(rawCursor) : undefined;
  if (rawCursor && !cursor) throw errors.badCursor();
  const rawLimit = q.get('limit');
  const limit = rawLimit === null ? { success: true as const, data: 50 } : pageLimit.safeParse(rawLimit);
  if (!limit.success) throw errors.invalidRequest('limit: must be an integer from 1 to 200');
  return { q, cursor, limit: limit.data };
}
