import { ringingBody } from './schemas.js';
import { fingerprint } from '../calls/store.js';
import { callReply } from './callReply.js';
import type { CallCommand } from './command.js';

/**
 * ringing (POST /v1/calls/{id}/ringing or a frame): the receipt of an invitee's installation that
 * shows the call (docs/group-calls.md "Ringing receipts"); the invitee's first tells the caller.
 * Returns the snapshot. Every receipt also notes that this installation rang (one SET in the
 * user's slot, after the script): with the end seen on its socket, it gets no missed-call alert
 * (src/push/missedCallSeen.ts, docs/protocol.md "Missed-call alerts").
 */
export const ringingCommand: CallCommand<typeof ringingBody> = {
  name: 'ringing',
  path: 'ringing',
  body: ringingBody,
  run: async (deps, me, callId, body) => {
    const outcome = await deps.calls.ringing({ callId, userId: me.userId, via: body.via, operationId: body.operationId, fingerprint: fingerprint('ringing', [callId, body.via]) });
    // Throws for a refusal (not an invitee, no such call): nothing is noted then.
    const reply = callReply(outcome, me.userId, 'only an invitee sends ringing receipts');
    if (reply.status === 200 && deps.missedCallSeen) await deps.missedCallSeen.noteRang(me.userId, callId, me.installationId);
    return reply;
  },
};
