import type { ApiDeps } from '../deps.js';
import type { Route } from '../router.js';
import { authenticate, parseJsonBody, parseParam } from '../request.js';
import { answerCallBody, opaqueId } from '../schemas.js';
import { ApiError } from '../errors.js';
import { fingerprint } from '../../calls/store.js';
import { callReply } from './callReplies.js';

/** POST /v1/calls/{id}/answer: the first answering installation wins; later ones get 409. */
export function answerCallRoute(deps: ApiDeps): Route {
  return {
    method: 'post',
    pattern: '/v1/calls/:id/answer',
    handler: async (ctx) => {
      const me = await authenticate(ctx, deps.auth);
      const callId = parseParam('id', ctx.params[0]!, opaqueId);
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
    },
  };
}
