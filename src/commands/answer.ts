import { answerCallBody } from './schemas.js';
import { errors } from './errors.js';
import { fingerprint } from '../calls/store.js';
import { callReply } from './callReply.js';
import type { CallCommand } from './command.js';

/** answer (POST /v1/calls/{id}/answer or a frame): the first answering installation wins; later ones get 409. */
export const answerCommand: CallCommand<typeof answerCallBody> = {
  name: 'answer',
  path: 'answer',
  body: answerCallBody,
  run: async (deps, me, callId, body) => {
    if (body.installationId !== me.installationId) {
      throw errors.forbidden("installationId does not match the session's installation");
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
