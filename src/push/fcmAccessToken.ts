import { CachedCredential } from './cachedCredential.js';
import { SignJWT, importPKCS8, type CryptoKey } from 'jose';

/**
 * OAuth 2.0 access tokens for the FCM HTTP v1 API, from a Google service account, by the
 * JWT-bearer grant (RFC 7523): a one-hour RS256 assertion is exchanged at the account's
 * `token_uri` for a bearer token, which is cached and shared by every send until shortly
 * before it expires. Exchanging per message would add a round trip to every push and hit the
 * token endpoint's quota.
 */

export const FCM_SCOPE = 'https://www.googleapis.com/auth/firebase.messaging';
const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const ASSERTION_LIFETIME_S = 3600;
const REFRESH_MARGIN_MS = 5 * 60_000;
const DEFAULT_TIMEOUT_MS = 10_000;

export interface ServiceAccount {
  client_email: string;
  private_key: string;
  token_uri: string;
  /** Sent as the assertion's `kid`, as Google's libraries do, when the key file has it. */
  private_key_id?: string;
}

/** The service account could not be used, or the token endpoint refused it. */
export class FcmAuthError extends Error {
  override name = 'FcmAuthError';
  constructor(
    message: string,
    /** The token endpoint's status; undefined when it was not reached. */
    readonly status?: number,
    /** True when trying again later may succeed (network, throttling, endpoint trouble). */
    readonly transient = false,
  ) {
    super(message);
  }
}

/** Reads a service-account JSON document (ANDROID_SERVICE_ACCOUNT_FILE's content). */
export function parseServiceAccount(json: string): ServiceAccount {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    throw new FcmAuthError('the service account file is not JSON');
  }
  const o = (parsed ?? {}) as Record<string, unknown>;
  for (const field of ['client_email', 'private_key', 'token_uri'] as const) {
    if (typeof o[field] !== 'string' || o[field] === '') {
      throw new FcmAuthError(`the service account file has no ${field}`);
    }
  }
  const account: ServiceAccount = {
    client_email: o.client_email as string,
    private_key: o.private_key as string,
    token_uri: o.token_uri as string,
  };
  if (typeof o.private_key_id === 'string' && o.private_key_id !== '') account.private_key_id = o.private_key_id;
  return account;
}

export interface FcmAccessTokenOptions {
  serviceAccount: ServiceAccount;
  /** Timeout of one token exchange. */
  timeoutMs?: number;
  /** Wall clock in epoch milliseconds; injectable for tests. */
  now?: () => number;
  fetch?: typeof globalThis.fetch;
}

interface CachedToken {
  value: string;
  refreshAtMs: number;
}

export class FcmAccessToken extends CachedCredential<CachedToken> {
  private readonly account: ServiceAccount;
  private readonly timeoutMs: number;
  private readonly now: () => number;
  private readonly fetch: typeof globalThis.fetch;
  private key: Promise<CryptoKey> | undefined;
  private exchanges = 0;

  constructor(options: FcmAccessTokenOptions) {
    super();
    this.account = options.serviceAccount;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.now = options.now ?? Date.now;
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  /** Token exchanges made so far (for metrics). */
  get exchangesMade(): number {
    return this.exchanges;
  }

  protected isFresh(t: CachedToken): boolean {
    return this.now() < t.refreshAtMs;
  }

  /** A new access token; rejects with FcmAuthError when none can be obtained. */
  protected async make(): Promise<CachedToken> {
    return this.exchange();
  }

  private async exchange(): Promise<CachedToken> {
    const key = await this.importKey();
    const iat = Math.floor(this.now() / 1000);
    const assertion = await new SignJWT({ scope: FCM_SCOPE })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT', ...(this.account.private_key_id ? { kid: this.account.private_key_id } : {}) })
      .setIssuer(this.account.client_email)
      .setAudience(this.account.token_uri)
      .setIssuedAt(iat)
      .setExpirationTime(iat + ASSERTION_LIFETIME_S)
      .sign(key);

    let res: Response;
    const requestedAtMs = this.now();
    try {
      res = await this.fetch(this.account.token_uri, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: JWT_BEARER_GRANT, assertion }).toString(),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      const timedOut = (err as { name?: unknown } | null)?.name === 'TimeoutError';
      throw new FcmAuthError(timedOut ? 'token endpoint timed out' : 'token endpoint unreachable', undefined, true);
    }

    let body: unknown;
    try {
      body = await res.json();
    } catch {
      body = undefined;
    }
    const o = (body ?? {}) as Record<string, unknown>;
    if (!res.ok) {
      // OAuth errors are codes such as invalid_grant; the description may quote the request.
      const code = typeof o.error === 'string' && /^[a-z_]{1,64}$/.test(o.error) ? o.error : `status ${res.status}`;
      throw new FcmAuthError(`token endpoint refused the service account: ${code}`, res.status, res.status === 429 || res.status >= 500);
    }
    const accessToken = o.access_token;
    const expiresIn = Number(o.expires_in);
    if (typeof accessToken !== 'string' || accessToken === '' || !Number.isFinite(expiresIn) || expiresIn <= 0) {
      throw new FcmAuthError('token endpoint answered without an access token', res.status, true);
    }
    // Counted from the request, not the answer: the token's lifetime started at the server.
    const lifetimeMs = expiresIn * 1000;
    this.exchanges++;
    return { value: accessToken, refreshAtMs: requestedAtMs + lifetimeMs - Math.min(REFRESH_MARGIN_MS, lifetimeMs / 2) };
  }

  private importKey(): Promise<CryptoKey> {
    this.key ??= importPKCS8(this.account.private_key, 'RS256').catch(() => {
      this.key = undefined;
      throw new FcmAuthError('the service account private_key is not a PKCS#8 RSA key');
    });
    return this.key;
  }
}
