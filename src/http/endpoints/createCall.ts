import type { ApiDeps } from '../deps.js';
import type { Route } from '../router.js';
import { authenticate, parseJsonBody, rateLimited } from '../request.js';
import { createCallBody } from '../schemas.js';
import { ApiError } from '../errors.js';
import { fingerprint } from '../../calls/store.js';
import { displayNameFor, handleFor } from '../../calls/identity.js';
import { callReply } from './callReplies.js';

/** POST /v1/calls: creates a ringing call; invitations are queued in the same transaction. */
export function createCallRoute(deps: ApiDeps): Route {
  return {
    method: 'post',
    pattern: '/v1/calls',
    handler: async (ctx) => {
      const me = await authenticate(ctx, deps.auth);
      const body = parseJsonBody(ctx, createCallBody);
      if (body.calleeUserId === me.userId) throw new ApiError('invalid_request', 'calleeUserId: you cannot call yourself');
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
        if (mine && !mine.allowed) throw rateLimited('too many calls created by this user; retry later', mine.retryAfterMs);
        throw rateLimited('this callee is receiving too many calls; retry later', (await invited!).retryAfterMs);
      }
      return callReply(outcome, me.userId);
    },
  };
}
