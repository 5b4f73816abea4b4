import type { RequestContext, Route } from '../../router.js';
import type { Reply } from '../../../commands/command.js';
import { errors } from '../../../commands/errors.js';

import { bearerToken } from '../../../auth/verifier.js';
import { checkToken, type AuthGuard } from '../../../auth/guard.js';
import type { ServerKeys } from '../../../auth/serverKeys.js';

/**
 * The server API's authentication (docs/server-api.md "Authentication"): a server API key, never
 * a device's session token. No credential, a wrong key or an invalid token: 401. A valid device
 * token: 403. Failures count toward the address's failed-authentication limit, as on device routes.
 */
export interface ServerAuth {
  keys: ServerKeys;
  /** The device guard: tells a device token (403) from garbage (401), and counts failures. */
  guard: AuthGuard;
}

export async function authenticateServer(ctx: RequestContext, auth: ServerAuth): Promise<void> {
  if (ctx.authorization === '') throw errors.unauthorized('missing Authorization header; send "Authorization: Bearer <server API key>"');
  const token = bearerToken(ctx.authorization);
  if (!token) throw errors.unauthorized('Authorization header must use the Bearer scheme');
  if (auth.keys.matches(token)) return;
  const result = await checkToken({ ...auth.guard, serverKeys: undefined }, token, ctx.remoteAddress);
  if (result.ok) throw errors.forbidden('a device session token is not accepted on the server API: use a server API key');
  if (result.kind === 'rate_limited') throw errors.rateLimited('too many failed authentications from this address', result.retryAfterMs);
  throw errors.unauthorized(auth.keys.configured ? `not a server API key (${result.kind === 'unauthorized' ? result.detail : 'refused'})` : 'the server API is off: SERVER_API_KEYS is empty');
}

/** A server API route: authenticated with a server key before `handle` runs. */
export function serverRoute(auth: ServerAuth, method: Route['method'], pattern: string, handle: (ctx: RequestContext) => Promise<Reply>): Route {
  return {
    method,
    pattern,
    handler: async (ctx) => {
      await authenticateServer(ctx, auth);
      return handle(ctx);
    },
  };
}
