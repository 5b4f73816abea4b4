import type { ApiDeps } from '../deps.js';
import type { Route } from '../router.js';
import { authenticate, parseJsonBody } from '../request.js';
import { createCallBody } from '../../commands/schemas.js';
import { createCall } from '../../commands/create.js';

/** POST /v1/calls: the create command (commands/create.ts) over HTTP. */
export function createCallRoute(deps: ApiDeps): Route {
  return {
    method: 'post',
    pattern: '/v1/calls',
    handler: async (ctx) => createCall(deps, await authenticate(ctx, deps.auth), parseJsonBody(ctx, createCallBody)),
  };
}
