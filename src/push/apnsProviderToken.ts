import { CachedCredential } from './cachedCredential.js';
import { SignJWT, importPKCS8, type CryptoKey } from 'jose';

/**
 * The APNs provider authentication token: an ES256 JWT signed with the team's .p8 key.
 *
 * APNs rejects a token older than one hour (403 ExpiredProviderToken) and throttles providers
 * that replace their token more often than every 20 minutes (429 TooManyProviderTokenUpdates),
 * so one token serves every push until it reaches the refresh age, which must lie between the
 * two.
 */

export const MIN_REFRESH_MS = 20 * 60_000;
export const MAX_REFRESH_MS = 60 * 60_000;
export const DEFAULT_REFRESH_MS = 30 * 60_000;

export interface ApnsProviderTokenOptions {
  /** The .p8 key file's content (PKCS#8 PEM, P-256). */
  keyPem: string;
  keyId: string;
  teamId: string;
  /** Age at which a new token is signed; 20 to 60 minutes. */
  refreshAfterMs?: number;
  /** Wall clock in epoch milliseconds; injectable for tests. */
  now?: () => number;
}

/** The key could not be used. The message never quotes the key. */
export class ApnsKeyError extends Error {
  override name = 'ApnsKeyError';
}

interface SignedToken {
  value: string;
  issuedAtMs: number;
}

export class ApnsProviderToken extends CachedCredential<SignedToken> {
  private readonly keyPem: string;
  private readonly keyId: string;
  private readonly teamId: string;
  private readonly refreshAfterMs: number;
  private readonly now: () => number;
  private key: Promise<CryptoKey> | undefined;
  private signed = 0;

  constructor(options: ApnsProviderTokenOptions) {
    super();
    const refreshAfterMs = options.refreshAfterMs ?? DEFAULT_REFRESH_MS;
    if (!Number.isFinite(refreshAfterMs) || refreshAfterMs < MIN_REFRESH_MS || refreshAfterMs > MAX_REFRESH_MS) {
      throw new RangeError(`APNs token refresh age must be between ${MIN_REFRESH_MS} and ${MAX_REFRESH_MS} ms`);
    }
    if (!options.keyId || !options.teamId) throw new TypeError('APNs key ID and team ID are required');
    this.keyPem = options.keyPem;
    this.keyId = options.keyId;
    this.teamId = options.teamId;
    this.refreshAfterMs = refreshAfterMs;
    this.now = options.now ?? Date.now;
  }

  /** Tokens signed so far (for metrics: about two an hour is healthy). */
  get tokensSigned(): number {
    return this.signed;
  }

  protected isFresh(t: SignedToken): boolean {
    const age = this.now() - t.issuedAtMs;
    // A negative age means the clock went back; the token's real age is then unknown.
    return age >= 0 && age < this.refreshAfterMs;
  }

  protected async make(): Promise<SignedToken> {
    const key = await this.importKey();
    // Ages are counted from the second APNs sees in `iat`.
    const issuedAtMs = Math.floor(this.now() / 1000) * 1000;
    const jwt = await new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: this.keyId })
      .setIssuer(this.teamId)
      .setIssuedAt(issuedAtMs / 1000)
      .sign(key);
    this.signed++;
    return { value: jwt, issuedAtMs };
  }

  private importKey(): Promise<CryptoKey> {
    this.key ??= importPKCS8(this.keyPem, 'ES256').catch(() => {
      this.key = undefined;
      throw new ApnsKeyError('the APNs key is not a PKCS#8 P-256 private key (.p8 file expected)');
    });
    return this.key;
  }
}
