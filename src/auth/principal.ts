/** Who is making a request: derived from the verified session token, never from JSON fields. */
export interface Principal {
  userId: string;
  installationId: string;
  /** The display name from the token's `name` claim, or the userId when absent. */
  name: string;
  /** Token expiry, epoch milliseconds. */
  expiresAtMs: number;
}

export class AuthError extends Error {
  override name = 'AuthError';
}

/**
 * Identifiers are opaque strings; control characters, braces (they would break Redis hash tags
 * and key boundaries) and absurd lengths are refused.
 */
export const ID_PATTERN = /^[^\u0000-\u001f\u007f{}]{1,128}$/;

export function principalFromClaims(claims: Record<string, unknown>): Principal {
  const { sub, iid, name, exp } = claims;
  if (typeof sub !== 'string' || !ID_PATTERN.test(sub)) throw new AuthError('token has no valid sub claim');
  // The handle `<scheme>:<percent-encoded sub>` must stay within the 256 bytes docs/protocol.md "Limits" allows.
  if (encodeURIComponent(sub).length > 200) throw new AuthError('token sub claim is too long');
  if (typeof iid !== 'string' || !ID_PATTERN.test(iid)) throw new AuthError('token has no valid iid claim');
  if (typeof exp !== 'number') throw new AuthError('token has no exp claim');
  const display = typeof name === 'string' && name.trim() !== '' ? name : sub;
  return { userId: sub, installationId: iid, name: display, expiresAtMs: exp * 1000 };
}
