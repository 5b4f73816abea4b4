import type { ApiDeps } from '../deps.js';
import type { Route } from '../router.js';
import { authenticate, parseParam } from '../request.js';
import { opaqueId } from '../schemas.js';
import { callReply } from './callReplies.js';

/** GET /v1/calls/{id}: the current snapshot, ended calls included; non-members get 404. */
export function getCallRoute(deps: ApiDeps): Route {
  return {
    method: 'get',
    pattern: '/v1/calls/:id',
    handler: async (ctx) => {
      const me = await authenticate(ctx, deps.auth);
      const callId = parseParam('id', ctx.params[0]!, opaqueId);
      return callReply(await deps.calls.read(callId, me.userId), me.userId);
    },
  };
}
