import { z } from 'zod';

/**
 * Cross-origin access for browser apps (docs/api.md "CORS"). Auth is by bearer token only, so the
 * server never allows credentials (cookies): `*` is safe, and a list answers with the request's
 * own origin when it is listed.
 */

export type CorsOrigins = '*' | readonly string[];

/** CORS_ORIGINS: empty (off), `*`, or a comma-separated list of origins such as https://app.example.com. */
export const corsOriginsSchema = z
  .string()
  .default('')
  .transform((v, ctx): CorsOrigins | undefined => {
    const entries = v.split(',').map((e) => e.trim()).filter(Boolean);
    if (entries.length === 0) return undefined;
    if (entries.length === 1 && entries[0] === '*') return '*';
    for (const e of entries) {
      if (!/^https?:\/\/[A-Za-z0-9.-]+(:\d{1,5})?$/.test(e)) {
        ctx.addIssue({ code: 'custom', message: `"${e}" is not an origin (scheme://host[:port], no path or trailing slash), nor a lone *` });
        return z.NEVER;
      }
    }
    return entries.map((e) => e.toLowerCase());
  });

export function originAllowed(origins: CorsOrigins, origin: string): boolean {
  return origins === '*' || origins.includes(origin.toLowerCase());
}
