import { generateKeyPairSync } from 'node:crypto';
import { createSigner } from 'fast-jwt';
import { mintToken } from '../../src/auth/devTokens.js';

/**
 * Session tokens for tests. Good tokens come from the project's own dev helper (HS256 with the
 * secret the test servers are started with); the bad ones are built here on purpose.
 */

/** The HS256 secret every test server is started with (≥ 32 bytes). */
export const TEST_JWT_SECRET = 'test-secret-0123456789abcdef-0123456789abcdef';

export interface Identity {
  userId: string;
  installationId: string;
  name?: string;
}

/** A valid session token for `userId` on `installationId` (24 h). */
export function tokenFor(id: Identity, secret = TEST_JWT_SECRET): string {
  return mintToken(secret, { sub: id.userId, iid: id.installationId, ...(id.name !== undefined ? { name: id.name } : {}) });
}

export function base64url(value: string | Buffer): string {
  return Buffer.from(value).toString('base64url');
}

/** A JWT assembled by hand: `base64url(header).base64url(payload).signature`. */
export function handMadeJwt(header: Record<string, unknown>, payload: Record<string, unknown>, signature = ''): string {
  return `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(payload))}.${signature}`;
}

/** An HMAC-signed JWT (fast-jwt's signer) with exactly the given claims: none is added. */
export function hmacJwt(alg: 'HS256' | 'HS384' | 'HS512', secret: string, payload: Record<string, unknown>): string {
  return createSigner({ key: secret, algorithm: alg, noTimestamp: true })(payload);
}

/** `alg: none`: header {"alg":"none","typ":"JWT"}, the claims, and an empty signature. */
export function unsignedJwt(payload: Record<string, unknown>): string {
  return handMadeJwt({ alg: 'none', typ: 'JWT' }, payload, '');
}

/** An RS256 token signed with a freshly generated RSA key (the server only knows an HS256 secret). */
export function rs256Jwt(payload: Record<string, unknown>): string {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const sign = createSigner({ key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), algorithm: 'RS256' });
  return sign(payload);
}

/** Claims with an expiry `secondsFromNow` away. */
export function claims(id: Identity, secondsFromNow = 3600, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const now = Math.floor(Date.now() / 1000);
  return { sub: id.userId, iid: id.installationId, iat: now, exp: now + secondsFromNow, ...extra };
}
