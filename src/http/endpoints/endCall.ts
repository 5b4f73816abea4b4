import type { ApiDeps } from '../deps.js';
import type { Route } from '../router.js';
import { callRoute } from './callRoute.js';
import { parseJsonBody } from '../request.js';
import { endCallBody } from '../schemas.js';
import { fingerprint } from '../../calls/store.js';
import { callReply } from './callReplies.js';

/** POST /v1/calls/{id}/end: hang-up, cancel, decline or local failure; returns the snapshot. */
export function endCallRoute(deps: ApiDeps): Route {
  return callRoute(deps, 'post', '/v1/calls/:id/end', async (ctx, me, callId) => {
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
  });
}
