import type { ApiDeps } from '../deps.js';
import type { RequestContext, Route } from '../router.js';
import type { Principal } from '../../auth/principal.js';
import type { z } from 'zod';
import type { CallCommand, Reply } from '../../commands/command.js';
import { authenticate, parseJsonBody, parseParam } from '../request.js';
import { opaqueId } from '../../commands/schemas.js';

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

/** A call command's HTTP route (commands/command.ts): `POST /v1/calls/{id}/<path>` with its body. */
export function commandRoute<S extends z.ZodType>(deps: ApiDeps, command: CallCommand<S>): Route {
  const options = command.bodyLimitBytes ? { bodyLimitBytes: command.bodyLimitBytes } : {};
  return callRoute(deps, 'post', `/v1/calls/:id/${command.path}`, (ctx, me, callId) => command.run(deps, me, callId, parseJsonBody(ctx, command.body)), options);
}
