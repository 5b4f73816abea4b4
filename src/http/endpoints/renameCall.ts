import type { ApiDeps } from '../deps.js';
import type { Route } from '../router.js';
import { authenticate, parseJsonBody, parseParam, rateLimited } from '../request.js';
import { opaqueId, renameCallBody } from '../schemas.js';
import { fingerprint } from '../../calls/store.js';
import { displayNameFor } from '../../calls/identity.js';
import { callReply } from './callReplies.js';

/**
 * POST /v1/calls/{id}/rename: the caller changes the name shown on a ringing or accepted call;
 * the callee's devices get a `call.renamed` event (the app calls setDisplayName).
 */
export function renameCallRoute(deps: ApiDeps): Route {
  return {
    method: 'post',
    pattern: '/v1/calls/:id/rename',
    handler: async (ctx) => {
      const me = await authenticate(ctx, deps.auth);
      const callId = parseParam('id', ctx.params[0]!, opaqueId);
      const body = parseJsonBody(ctx, renameCallBody);
      const displayName = displayNameFor(body.displayName);
      // Each rename is an event in the callee's log: one user may not flood other users' logs.
      const hit = await deps.limits.renames?.hit(me);
      if (hit && !hit.allowed) throw rateLimited('too many renames by this user; retry later', hit.retryAfterMs);
      const outcome = await deps.calls.rename({
        callId,
        userId: me.userId,
        displayName,
        operationId: body.operationId,
        fingerprint: fingerprint('rename', [callId, displayName]),
      });
      return callReply(outcome, me.userId, 'only the caller can rename a call');
    },
  };
}
