import type { z } from 'zod';
import type { Principal } from '../auth/principal.js';
import type { Config } from '../config/config.js';
import { fingerprint } from '../calls/store.js';
import { displayNameFor, handleFor } from '../calls/identity.js';
import { createCallBody } from './schemas.js';
import { errors } from './errors.js';
import { callReply } from './callReply.js';
import type { CommandDeps, Reply } from './command.js';

/**
 * create (POST /v1/calls): a ringing call for the callee; its invitations are queued in the same
 * transaction. The call ID travels in the body, so it is the one command no call route carries.
 */
export async function createCall(
  deps: CommandDeps & { config: Pick<Config, 'HANDLE_SCHEME'> },
  me: Pick<Principal, 'userId' | 'installationId' | 'name'>,
  body: z.output<typeof createCallBody>,
): Promise<Reply> {
  if (body.calleeUserId === me.userId) throw errors.invalidRequest('calleeUserId: you cannot call yourself');
  // Sent now, so they share a round trip with the store's first reads: the caller's own limit,
  // and the callee's (how many invitations any callers together may add to its log, docs/api.md
  // "Abuse limits").
  const hit = deps.limits.callCreates?.hit(me);
  const invited = deps.limits.invitesPerCallee?.hit({ calleeUserId: body.calleeUserId });
  const admitted = hit || invited ? Promise.all([hit, invited]).then(([a, b]) => (a?.allowed ?? true) && (b?.allowed ?? true)) : undefined;
  const outcome = await deps.calls.create(
    {
      callId: body.callId,
      callerUserId: me.userId,
      callerInstallationId: me.installationId,
      callerDisplayName: displayNameFor(me.name),
      callerHandle: handleFor(deps.config.HANDLE_SCHEME, me.userId),
      calleeUserId: body.calleeUserId,
      video: body.video,
      operationId: body.operationId,
      fingerprint: fingerprint('create', [body.callId, body.calleeUserId, body.video]),
    },
    admitted,
  );
  if (outcome.kind === 'not_admitted') {
    const mine = await hit;
    if (mine && !mine.allowed) throw errors.rateLimited('too many calls created by this user; retry later', mine.retryAfterMs);
    throw errors.rateLimited('this callee is receiving too many calls; retry later', (await invited!).retryAfterMs);
  }
  return callReply(outcome, me.userId);
}
