import type { ApiDeps } from '../deps.js';
import type { Route } from '../router.js';
import { authenticate, parseJsonBody, parseParam } from '../request.js';
import { endCallBody, opaqueId } from '../schemas.js';
import { fingerprint } from '../../calls/store.js';
import { callReply } from './callReplies.js';

/** POST /v1/calls/{id}/end: hang-up, cancel, decline or local failure; returns the snapshot. */
export function endCallRoute(deps: ApiDeps): Route {
  return {
    method: 'post',
    pattern: '/v1/calls/:id/end',
    handler: async (ctx) => {
      const me = await authenticate(ctx, deps.auth);
      const callId = parseParam('id', ctx.params[0]!, opaqueId);
      const body = parseJsonBody(ctx, endCallBody);
      const outcome = await deps.calls.end({
        callId,
        userId: me.userId,
        installationId: me.installationId,
        reason: body.reason,
        operationId: body.operationId,
        fingerprint: fingerprint('end', [callId, body.reason]),
      });
      return callReply(outcome, me.userId);
    },
  };
}
