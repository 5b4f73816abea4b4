import { endCallBody } from './schemas.js';
import { fingerprint } from '../calls/store.js';
import { callReply } from './callReply.js';
import type { CallCommand } from './command.js';

/** end (POST /v1/calls/{id}/end or a frame): hang-up, cancel, decline or local failure; returns the snapshot. */
export const endCommand: CallCommand<typeof endCallBody> = {
  name: 'end',
  path: 'end',
  body: endCallBody,
  run: async (deps, me, callId, body) => {
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
