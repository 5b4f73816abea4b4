import { inviteBody } from './schemas.js';
import { errors } from './errors.js';
import { fingerprint } from '../calls/store.js';
import { callReply } from './callReply.js';
import { inviteeLimits, type CallCommand } from './command.js';

/**
 * invite (POST /v1/calls/{id}/invite or a frame): a participant of a group call rings more users
 * into it (docs/group-calls.md "Inviting more"); returns the snapshot.
 */
export const inviteCommand: CallCommand<typeof inviteBody> = {
  name: 'invite',
  path: 'invite',
  body: inviteBody,
  run: async (deps, me, callId, body) => {
    if (body.userIds.includes(me.userId)) throw errors.invalidRequest('userIds: you cannot invite yourself');
    // Each invitee's own limit, as for a new call (docs/api.md "Abuse limits").
    const outcome = await deps.calls.invite(
      {
        callId,
        userId: me.userId,
        installationId: me.installationId,
        inviteeUserIds: body.userIds,
        operationId: body.operationId,
        fingerprint: fingerprint('invite', [callId, JSON.stringify(body.userIds)]),
      },
      inviteeLimits(deps.limits, body.userIds),
    );
    if (outcome.kind === 'not_admitted') throw errors.rateLimited('a callee is receiving too many calls; retry later', outcome.retryAfterMs);
    return callReply(outcome, me.userId, 'only a participant in the call, from its installation in the call, can invite');
  },
};
