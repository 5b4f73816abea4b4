import { ringingBody } from './schemas.js';
import { fingerprint } from '../calls/store.js';
import { callReply } from './callReply.js';
import type { CallCommand } from './command.js';

/**
 * ringing (POST /v1/calls/{id}/ringing or a frame): the receipt of an invitee's installation that
 * shows the call (docs/group-calls.md "Ringing receipts"); the invitee's first tells the caller.
 * Returns the snapshot.
 */
export const ringingCommand: CallCommand<typeof ringingBody> = {
  name: 'ringing',
  path: 'ringing',
  body: ringingBody,
  run: async (deps, me, callId, body) => {
    const outcome = await deps.calls.ringing({ callId, userId: me.userId, via: body.via, operationId: body.operationId, fingerprint: fingerprint('ringing', [callId, body.via]) });
    return callReply(outcome, me.userId, 'only an invitee sends ringing receipts');
  },
};
