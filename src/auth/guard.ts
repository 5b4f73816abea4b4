import type { TokenVerifier } from './verifier.js';
import { AuthError, type Principal } from './principal.js';
import type { FailureCounter } from '../limits/rateLimiter.js';

/** Token verification plus the per-IP failed-authentication limit, shared by HTTP and WebSocket. */
export interface AuthGuard {
  verify: TokenVerifier;
  /** Failed authentications per remote address; undefined when the limit is off. */
  failures: FailureCounter | undefined;
}

export type GuardResult =
  | { ok: true; principal: Principal }
  | { ok: false; kind: 'unauthorized'; detail: string }
  | { ok: false; kind: 'rate_limited'; retryAfterMs: number };

/** Verifies `token` for a client at `remoteAddress`; an address with too many failures is refused first. */
export async function checkToken(guard: AuthGuard, token: string, remoteAddress: string): Promise<GuardResult> {
  const blocked = guard.failures?.blocked(remoteAddress);
  if (blocked && !blocked.allowed) return { ok: false, kind: 'rate_limited', retryAfterMs: blocked.retryAfterMs };
  try {
    const principal = await guard.verify(token);
    if (principal.expiresAtMs <= Date.now()) throw new AuthError('token expired');
    return { ok: true, principal };
  } catch (err) {
    if (!(err instanceof AuthError)) throw err;
    guard.failures?.fail(remoteAddress);
    return { ok: false, kind: 'unauthorized', detail: err.message };
  }
}
