import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { createSigner } from 'fast-jwt';

/** Development helpers: a persistent local secret and ready-to-use session tokens. */

/** Reads the dev secret from `file`, creating it (0600) on first use. */
export function devSecret(file: string): string {
  try {
    const s = readFileSync(file, 'utf8').trim();
    if (s.length >= 32) return s;
  } catch {
    /* first run */
  }
  const secret = randomBytes(32).toString('base64url');
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, secret + '\n', { mode: 0o600 });
  return secret;
}

export interface TokenClaims {
  sub: string;
  iid: string;
  name?: string;
  ttlSeconds?: number;
  iss?: string;
  aud?: string;
}

/** Mints an HS256 session token (for development and tests). */
export function mintToken(secret: string, c: TokenClaims): string {
  const sign = createSigner({ key: secret, algorithm: 'HS256', expiresIn: (c.ttlSeconds ?? 24 * 3600) * 1000 });
  const payload: Record<string, string> = { sub: c.sub, iid: c.iid };
  if (c.name) payload.name = c.name;
  if (c.iss) payload.iss = c.iss;
  if (c.aud) payload.aud = c.aud;
  return sign(payload);
}
