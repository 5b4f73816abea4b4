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

export type TokenVerifier = (token: string) => Principal | Promise<Principal>;

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
 * Builds the session-token verifier. fast-jwt (with its verification cache) serves the hot path
 * for a shared secret or a PEM public key; jose serves JWKS, whose keys rotate.
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
        throw new AuthError(describeJoseError(err));
      }
    };
  }
  const key = s.secret ?? s.publicKeyPem;
  if (!key) throw new Error('no token verification key configured');
  const verify = createVerifier({
    key,
    algorithms: s.secret ? ['HS256'] : algorithmsForPublicKey(key),
    cache: 10_000,
    requiredClaims: ['exp', 'sub', 'iid'],
    ...(s.issuer ? { allowedIss: s.issuer } : {}),
    ...(s.audience ? { allowedAud: s.audience } : {}),
  });
  return (token) => {
    let claims: Record<string, unknown>;
    try {
      claims = verify(token) as Record<string, unknown>;
    } catch (err) {
      throw new AuthError(describeFastJwtError(err));
    }
    return principalFromClaims(claims);
  };
}

function describeFastJwtError(err: unknown): string {
  const code = (err as { code?: string }).code ?? '';
  if (code === 'FAST_JWT_EXPIRED') return 'token expired';
  if (code === 'FAST_JWT_INVALID_SIGNATURE') return 'token signature is invalid';
  if (code === 'FAST_JWT_INVALID_ALGORITHM') return 'token algorithm is not accepted';
  if (code === 'FAST_JWT_MISSING_REQUIRED_CLAIM') return 'token is missing a required claim (exp, sub, iid)';
  if (code === 'FAST_JWT_INVALID_CLAIM_VALUE') return 'token issuer or audience is not accepted';
  if (code === 'FAST_JWT_INACTIVE') return 'token is not active yet';
  return 'token is malformed';
}

function describeJoseError(err: unknown): string {
  const code = (err as { code?: string }).code ?? '';
  if (code === 'ERR_JWT_EXPIRED') return 'token expired';
  if (code === 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED') return 'token signature is invalid';
  if (code === 'ERR_JOSE_ALG_NOT_ALLOWED') return 'token algorithm is not accepted';
  if (code === 'ERR_JWKS_NO_MATCHING_KEY') return 'token key is unknown';
  if (code === 'ERR_JWT_CLAIM_VALIDATION_FAILED') return 'token claims are not accepted';
  return 'token is malformed';
}

/** Extracts the token from `Authorization: Bearer <t>`; undefined when absent or another scheme. */
export function bearerToken(header: string): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1];
}
