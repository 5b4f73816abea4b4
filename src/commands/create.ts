import type { z } from 'zod';
import type { Principal } from '../auth/principal.js';
import type { Config } from '../config/config.js';
import { fingerprint } from '../calls/store.js';
import { displayNameFor, handleFor } from '../calls/identity.js';
import { createCallBody } from './schemas.js';
import { errors } from './errors.js';
import { callReply } from './callReply.js';
import { inviteeLimits, type CommandDeps, type Reply } from './command.js';

/**
 * create (POST /v1/calls): a ringing call for the callee; its invitations are queued in the same
 * transaction. The call ID travels in the body, so it is the one command no call route carries.
 */
export async function createCall(
  deps: CommandDeps & { config: Pick<Config, 'HANDLE_SCHEME' | 'GROUP_CALL_MAX_MEMBERS'> },
  me: Pick<Principal, 'userId' | 'installationId' | 'name'>,
  body: z.output<typeof createCallBody>,
): Promise<Reply> {
  const group = 'calleeUserIds' in body ? body : undefined;
  const invitees = group ? group.calleeUserIds : [body.calleeUserId!];
  if (invitees.includes(me.userId)) throw errors.invalidRequest(`${group ? 'calleeUserIds' : 'calleeUserId'}: you cannot call yourself`);
  if (group && invitees.length > deps.config.GROUP_CALL_MAX_MEMBERS) {
    throw errors.invalidRequest(`calleeUserIds: at most ${deps.config.GROUP_CALL_MAX_MEMBERS} users (GROUP_CALL_MAX_MEMBERS)`);
  }
  // The caller's own limit, and each invitee's (how many invitations any callers together may add
  // to its log, docs/api.md "Abuse limits"), in the order the store reports a refusal by.
  const mine = deps.limits.callCreates?.counter(me);
  const limits = [...(mine ? [mine] : []), ...inviteeLimits(deps.limits, invitees)];
  const caller = {
    callId: body.callId,
    callerUserId: me.userId,
    callerInstallationId: me.installationId,
    callerDisplayName: displayNameFor(me.name),
    callerHandle: handleFor(deps.config.HANDLE_SCHEME, me.userId),
    video: body.video,
    operationId: body.operationId,
  };
  const outcome = group
    ? await deps.calls.createGroup(
        {
          ...caller,
          inviteeUserIds: group.calleeUserIds,
          title: group.title ? displayNameFor(group.title) : '',
          fingerprint: fingerprint('create-group', [body.callId, JSON.stringify(group.calleeUserIds), group.title ?? null, body.video]),
        },
        limits,
      )
    : await deps.calls.create({ ...caller, calleeUserId: body.calleeUserId!, fingerprint: fingerprint('create', [body.callId, body.calleeUserId!, body.video]) }, limits);
  if (outcome.kind === 'not_admitted') {
    if (outcome.refused === mine) throw errors.rateLimited('too many calls created by this user; retry later', outcome.retryAfterMs);
    throw errors.rateLimited(`${group ? 'a callee' : 'this callee'} is receiving too many calls; retry later`, outcome.retryAfterMs);
  }
  return callReply(outcome, me.userId);
}
