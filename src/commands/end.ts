import { endCallBody } from './schemas.js';
import { fingerprint } from '../calls/store.js';
import { callReply } from './callReply.js';
import type { CallCommand } from './command.js';

/**
 * end (POST /v1/calls/{id}/end or a frame): hang-up, cancel, decline or local failure; on a group
 * call also leave, or with `forAll` the caller's end for everyone. Returns the snapshot.
 */
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
      forAll: body.forAll,
      operationId: body.operationId,
      // Without forAll, the fingerprint of the one-to-one end request as it always was.
      fingerprint: fingerprint('end', body.forAll ? [callId, body.reason, true] : [callId, body.reason]),
    });
    return callReply(outcome, me.userId);
  },
};
