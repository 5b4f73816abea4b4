import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';

/**
 * Server API keys (docs/server-api.md "Authentication"): the credential of the app's own backend,
 * which no device holds. A key is `sk_` and 32 random bytes (base64url); the server keeps only
 * SHA-256 hashes of its keys (SERVER_API_KEYS), so its configuration never holds one.
 */
export const SERVER_KEY_PREFIX = 'sk_';

/** A new key and the hash to configure for it (`npm run server-key`). */
export function newServerKey(): { key: string; hash: string } {
  const key = `${SERVER_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  return { key, hash: serverKeyHash(key) };
}

/** `sha256:<hex>`, the form SERVER_API_KEYS lists. */
export function serverKeyHash(key: string): string {
  return `sha256:${createHash('sha256').update(key).digest('hex')}`;
}

/** SERVER_API_KEYS: comma-separated `sha256:<64 hex>` hashes (several: one per backend, or while a key rotates). */
export const serverKeyHashesSchema = z
  .string()
  .default('')
  .transform((v) => v.split(',').map((h) => h.trim().toLowerCase()).filter(Boolean))
  .pipe(z.array(z.string().regex(/^sha256:[0-9a-f]{64}$/, 'each entry must be sha256:<64 hex digits> (npm run server-key prints one)')));

export class ServerKeys {
  private readonly hashes: ReadonlySet<string>;

  constructor(hashes: readonly string[]) {
    this.hashes = new Set(hashes);
  }

  get configured(): boolean {
    return this.hashes.size > 0;
  }

  /** Whether the bearer token is one of the keys (compared by hash: no timing to learn from). */
  matches(token: string): boolean {
    return token.startsWith(SERVER_KEY_PREFIX) && this.hashes.has(serverKeyHash(token));
  }
}
