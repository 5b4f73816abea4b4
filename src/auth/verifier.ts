import { createPublicKey } from 'node:crypto';
import { createVerifier, type Algorithm } from 'fast-jwt';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { AuthError, principalFromClaims, type Principal } from './principal.js';

export interface AuthSettings {
  secret?: string | undefined;
  publicKeyPem?: string | undefined;
  jwksUrl?: string | undefined;
  issuer?: string | undefined;
  audience?: string | undefined;
}

/**
 * `remember` false: a hit in the cache of verified tokens is used, but a token verified now is
 * not added to it (a socket's token, checked once at the upgrade).
 */
export type TokenVerifier = (token: string, remember?: boolean) => Principal | Promise<Principal>;

/** The algorithms a PEM public key can verify; `none` and HMAC are never among them. */
function algorithmsForPublicKey(pem: string): Algorithm[] {
  const key = createPublicKey(pem);
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'];
    case 'rsa-pss':
      return ['PS256', 'PS384', 'PS512'];
    case 'ec': {
      const curve = key.asymmetricKeyDetails?.namedCurve;
      if (curve === 'prime256v1') return ['ES256'];
      if (curve === 'secp384r1') return ['ES384'];
      if (curve === 'secp521r1') return ['ES512'];
      throw new Error(`AUTH_JWT_PUBLIC_KEY: unsupported EC curve ${String(curve)}`);
    }
    case 'ed25519':
    case 'ed448':
      return ['EdDSA'];
    default:
      throw new Error(`AUTH_JWT_PUBLIC_KEY: unsupported key type ${String(key.asymmetricKeyType)}`);
  }
}

/**
 * Builds the session-token verifier. fast-jwt (behind a cache of verified tokens) serves the hot
 * path for a shared secret or a PEM public key; jose serves JWKS, whose keys rotate.
 */
export function createTokenVerifier(s: AuthSettings): TokenVerifier {
  if (s.jwksUrl) {
    const jwks = createRemoteJWKSet(new URL(s.jwksUrl));
    return async (token) => {
      try {
        const { payload } = await jwtVerify(token, jwks, {
          requiredClaims: ['exp', 'sub'],
          ...(s.issuer ? { issuer: s.issuer } : {}),
          ...(s.audience ? { audience: s.audience } : {}),
        });
        return principalFromClaims(payload as Record<string, unknown>);
      } catch (err) {
        if (err instanceof AuthError) throw err;
        throw new AuthError(describeError(JOSE_ERRORS, err));
      }
    };
  }
  const key = s.secret ?? s.publicKeyPem;
  if (!key) throw new Error('no token verification key configured');
  const verify = createVerifier({
    key,
    algorithms: s.secret ? ['HS256'] : algorithmsForPublicKey(key),
    requiredClaims: ['exp', 'sub', 'iid'],
    ...(s.issuer ? { allowedIss: s.issuer } : {}),
    ...(s.audience ? { allowedAud: s.audience } : {}),
  });
  return cachedByToken((token) => {
    let claims: Record<string, unknown>;
    try {
      claims = verify(token) as Record<string, unknown>;
    } catch (err) {
      throw new AuthError(describeError(FAST_JWT_ERRORS, err));
    }
    return principalFromClaims(claims);
  });
}

/**
 * How many verified tokens the cache keeps: a device's token is verified once, not per request.
 * About 510 B of heap each (token, principal and map entry; a soak's tokens), 5 MB when full.
 * Exported for the soak, which fills it before it measures (bench/scenarios/soak.ts).
 */
export const TOKEN_CACHE_SIZE = 10_000;

/**
 * Remembers each verified token's principal until the token expires, keyed by the token itself.
 * Not fast-jwt's own cache: it keys by a SHA-256 of the token, a hash object and a hex digest on
 * every request, hits included (3 % of the API process's CPU, docs/performance.md "Performance"), and it
 * warns at start-up about any other key. The token as its own key cannot collide. Refused tokens
 * are not kept. When full, the oldest entry goes (a busy token evicted is verified once more).
 * Principals are shared between requests, so they are frozen.
 */
function cachedByToken(verify: (token: string) => Principal): (token: string, remember?: boolean) => Principal {
  const cache = new Map<string, Principal>();
  return (token, remember = true) => {
    const hit = cache.get(token);
    // Expired at its exp instant, as the guard counts it (auth/guard.ts).
    if (hit && Date.now() < hit.expiresAtMs) return hit;
    if (hit) cache.delete(token);
    const principal = Object.freeze(verify(token));
    if (!remember) return principal;
    if (cache.size >= TOKEN_CACHE_SIZE) cache.delete(cache.keys().next().value!);
    cache.set(token, principal);
    return principal;
  };
}

/** What each library's error code means for the client (401 detail); anything else: malformed. */
const FAST_JWT_ERRORS: Record<string, string> = {
  FAST_JWT_EXPIRED: 'token expired',
  FAST_JWT_INVALID_SIGNATURE: 'token signature is invalid',
  FAST_JWT_INVALID_ALGORITHM: 'token algorithm is not accepted',
  FAST_JWT_MISSING_REQUIRED_CLAIM: 'token is missing a required claim (exp, sub, iid)',
  FAST_JWT_INVALID_CLAIM_VALUE: 'token issuer or audience is not accepted',
  FAST_JWT_INACTIVE: 'token is not active yet',
};
const JOSE_ERRORS: Record<string, string> = {
  ERR_JWT_EXPIRED: 'token expired',
  ERR_JWS_SIGNATURE_VERIFICATION_FAILED: 'token signature is invalid',
  ERR_JOSE_ALG_NOT_ALLOWED: 'token algorithm is not accepted',
  ERR_JWKS_NO_MATCHING_KEY: 'token key is unknown',
  ERR_JWT_CLAIM_VALIDATION_FAILED: 'token claims are not accepted',
};

function describeError(messages: Record<string, string>, err: unknown): string {
  return messages[(err as { code?: string }).code ?? ''] ?? 'token is malformed';
}

/** Extracts the token from `Authorization: Bearer <t>`; undefined when absent or another scheme. */
export function bearerToken(header: string): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1];
}
