import type { ApiDeps } from '../deps.js';
import type { Reply, RequestContext, Route } from '../router.js';
import type { Principal } from '../../auth/principal.js';
import { authenticate, parseParam } from '../request.js';
import { opaqueId } from '../schemas.js';

/** What a route on one call gets once its session and the call ID in its path are checked. */
export type CallHandler = (ctx: RequestContext, me: Principal, callId: string) => Promise<Reply>;

/**
 * A route on one call (`/v1/calls/:id...`): authenticates the request (401) and validates the
 * call ID (400) before `handle` runs; membership is the store's to check (404 for non-members).
 */
export function callRoute(deps: Pick<ApiDeps, 'auth'>, method: Route['method'], pattern: string, handle: CallHandler, options: Pick<Route, 'bodyLimitBytes'> = {}): Route {
  return {
    method,
    pattern,
    ...options,
    handler: async (ctx) => {
      const me = await authenticate(ctx, deps.auth);
      return handle(ctx, me, parseParam('id', ctx.params[0]!, opaqueId));
    },
  };
}
