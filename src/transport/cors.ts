import { originAllowed, type CorsOrigins } from '../config/cors.js';

/** The CORS response headers (docs/api.md "CORS"); which origins are allowed is config/cors.ts. */

/** Headers a browser may send cross-origin, and response headers its scripts may read. */
export const CORS_ALLOW_HEADERS = 'authorization, content-type, x-request-id';
export const CORS_EXPOSE_HEADERS = 'retry-after, x-request-id, allow, www-authenticate';
export const CORS_MAX_AGE_S = 600;

/** The CORS headers of an ordinary (or error) response to a request carrying `origin`. */
export function corsResponseHeaders(origins: CorsOrigins | undefined, origin: string): Record<string, string> {
  if (!origins || !origin || !originAllowed(origins, origin)) return origins && origins !== '*' ? { vary: 'origin' } : {};
  return {
    'access-control-allow-origin': origins === '*' ? '*' : origin,
    'access-control-expose-headers': CORS_EXPOSE_HEADERS,
    ...(origins === '*' ? {} : { vary: 'origin' }),
  };
}

/** The extra headers of a successful preflight for a path that allows `methods`. */
export function preflightHeaders(methods: string): Record<string, string> {
  return {
    'access-control-allow-methods': methods,
    'access-control-allow-headers': CORS_ALLOW_HEADERS,
    'access-control-max-age': String(CORS_MAX_AGE_S),
  };
}
