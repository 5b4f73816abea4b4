import type { TokenVerifier } from './verifier.js';
import { AuthError, type Principal } from './principal.js';
import type { ServerKeys } from './serverKeys.js';

/** Token verification plus the per-IP failed-authentication limit, shared by HTTP and WebSocket. */
/** What the guard needs of a count of failed authentications per address (limits/rateLimiter.ts FailureCounter). */
export interface FailureLimit {
  /** Whether any address may be over the limit now (callers skip reading the address if not). */
  anyBlocked(): boolean;
  blocked(address: string): { allowed: boolean; retryAfterMs: number };
  fail(address: string): void;
}

export interface AuthGuard {
  verify: TokenVerifier;
  /** The server API's keys: refused on device routes and sockets (403), never verified as a JWT. */
  serverKeys?: ServerKeys;
  /** Failed authentications per remote address; undefined when the limit is off. */
  failures: FailureLimit | undefined;
}

/** The client's address when asked for; undefined when it can no longer be read (src/transport/clientAddress.ts). */
export type ClientAddress = () => string | undefined;

export type GuardResult =
  | { ok: true; principal: Principal }
  | { ok: false; kind: 'unauthorized'; detail: string }
  | { ok: false; kind: 'forbidden'; detail: string }
  | { ok: false; kind: 'rate_limited'; retryAfterMs: number };

/**
 * Verifies `token` for a client at `remoteAddress`; an address with too many failures is refused
 * first. `remember` false keeps a newly verified token out of the verifier's cache (auth/verifier.ts). The address is read only while some address is over the limit, or to count a failure.
 */
export async function checkToken(guard: AuthGuard, token: string, remoteAddress: ClientAddress, remember = true): Promise<GuardResult> {
  const failures = guard.failures;
  if (failures?.anyBlocked()) {
    const address = remoteAddress();
    const blocked = address === undefined ? undefined : failures.blocked(address);
    if (blocked && !blocked.allowed) return { ok: false, kind: 'rate_limited', retryAfterMs: blocked.retryAfterMs };
  }
  if (guard.serverKeys?.matches(token)) return { ok: false, kind: 'forbidden', detail: 'a server API key is not accepted here: devices use their session token' };
  try {
    const principal = await guard.verify(token, remember);
    if (principal.expiresAtMs <= Date.now()) throw new AuthError('token expired');
    return { ok: true, principal };
  } catch (err) {
    if (!(err instanceof AuthError)) throw err;
    const failed = failures && remoteAddress();
    if (failed) failures.fail(failed);
    return { ok: false, kind: 'unauthorized', detail: err.message };
  }
}
