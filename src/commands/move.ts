import { moveCallBody } from './schemas.js';
import { errors } from './errors.js';
import { fingerprint } from '../calls/store.js';
import { callReply } from './callReply.js';
import type { CallCommand } from './command.js';

/**
 * move (POST /v1/calls/{id}/move or a frame): another installation of a member in an accepted call
 * claims it; the call goes on from there (docs/protocol.md "Moving a call").
 */
export const moveCommand: CallCommand<typeof moveCallBody> = {
  name: 'move',
  path: 'move',
  body: moveCallBody,
  run: async (deps, me, callId, body) => {
    if (body.installationId !== me.installationId) {
      throw errors.forbidden("installationId does not match the session's installation");
    }
    const outcome = await deps.calls.move({
      callId,
      userId: me.userId,
      installationId: me.installationId,
      expectedRevision: body.expectedRevision,
      operationId: body.operationId,
      fingerprint: fingerprint('move', [callId, body.installationId, body.expectedRevision]),
    });
    return callReply(outcome, me.userId);
  },
};
