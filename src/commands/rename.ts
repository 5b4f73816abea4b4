import { errors } from './errors.js';
import { renameCallBody } from './schemas.js';
import { fingerprint } from '../calls/store.js';
import { displayNameFor } from '../calls/identity.js';
import { callReply } from './callReply.js';
import type { CallCommand } from './command.js';

/**
 * rename (POST /v1/calls/{id}/rename or a frame): the caller changes the name shown on a ringing
 * or accepted call; the callee's devices get a `call.renamed` event (the app calls setDisplayName).
 */
export const renameCommand: CallCommand<typeof renameCallBody> = {
  name: 'rename',
  path: 'rename',
  body: renameCallBody,
  run: async (deps, me, callId, body) => {
    const displayName = displayNameFor(body.displayName);
    // Each rename is an event in the callee's log: one user may not flood other users' logs.
    const hit = await deps.limits.renames?.hit(me);
    if (hit && !hit.allowed) throw errors.rateLimited('too many renames by this user; retry later', hit.retryAfterMs);
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
