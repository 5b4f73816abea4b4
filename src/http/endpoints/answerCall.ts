import type { ApiDeps } from '../deps.js';
import type { Route } from '../router.js';
import { callRoute } from './callRoute.js';
import { parseJsonBody } from '../request.js';
import { answerCallBody } from '../schemas.js';
import { ApiError } from '../errors.js';
import { fingerprint } from '../../calls/store.js';
import { callReply } from './callReplies.js';

/** POST /v1/calls/{id}/answer: the first answering installation wins; later ones get 409. */
export function answerCallRoute(deps: ApiDeps): Route {
  return callRoute(deps, 'post', '/v1/calls/:id/answer', async (ctx, me, callId) => {
    const body = parseJsonBody(ctx, answerCallBody);
    if (body.installationId !== me.installationId) {
      throw new ApiError('forbidden', "installationId does not match the session's installation");
    }
    const outcome = await deps.calls.answer({
      callId,
      userId: me.userId,
      installationId: me.installationId,
      expectedRevision: body.expectedRevision,
      operationId: body.operationId,
      fingerprint: fingerprint('answer', [callId, body.installationId, body.expectedRevision ?? null]),
    });
    return callReply(outcome, me.userId);
  });
}
