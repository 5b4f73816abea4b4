import type { ApiDeps } from '../deps.js';
import type { Route } from '../router.js';
import { callRoute } from './callRoute.js';
import { parseJsonBody } from '../request.js';
import { mediaSessionBody } from '../../commands/schemas.js';
import { errors } from '../../commands/errors.js';
import { fingerprint, type Outcome } from '../../calls/store.js';
import { inCallInstallation, sideOf } from '../../calls/model.js';
import { toSnapshot } from '../../calls/snapshot.js';
import { mediaCredentials } from '../../calls/mediaCredentials.js';
import { callReply, failureError } from '../../commands/callReply.js';

/**
 * POST /v1/calls/{id}/media-session: short-lived TURN credentials for a participant of an
 * accepted call: the caller's calling installation or the answering installation. With
 * MEDIA_SESSION_ANSWERS, the callee's request on a ringing call is its answer claim (docs/protocol.md "Media session").
 */
export function mediaSessionRoute(deps: ApiDeps): Route {
  const { config } = deps;
  return callRoute(deps, 'post', '/v1/calls/:id/media-session', async (ctx, me, callId) => {
    const body = parseJsonBody(ctx, mediaSessionBody, true);
    let outcome: Outcome = await deps.calls.read(callId, me.userId);
    if (outcome.kind === 'failure') throw failureError(outcome.code);
    let call = outcome.call;
    const side = sideOf(call, me.userId);
    if (!side) throw errors.callNotFound();

    if (call.state === 'ringing' && side === 'callee' && config.MEDIA_SESSION_ANSWERS) {
      // The answer claim: idempotent per installation unless the client names an operation.
      const operationId = body.operationId ?? `media-session.${me.installationId}`;
      outcome = await deps.calls.answer({
        callId,
        userId: me.userId,
        installationId: me.installationId,
        expectedRevision: undefined,
        operationId,
        fingerprint: fingerprint('answer', [callId, me.installationId, null]),
      });
      if (outcome.kind === 'failure' || outcome.code !== 'ok') return callReply(outcome, me.userId);
      call = outcome.call;
    }

    if (inCallInstallation(call, side) !== me.installationId) {
      if (call.state === 'accepted' && side === 'callee') {
        throw errors.answerConflict(toSnapshot(call, side));
      }
      throw errors.forbidden(`media credentials are issued only to the installations in an accepted call; this call is ${call.state}`);
    }
    const creds = mediaCredentials({
      userId: me.userId,
      nowMs: Date.now(),
      ttlSeconds: config.MEDIA_CREDENTIAL_TTL_S,
      urls: config.TURN_URLS,
      secret: config.TURN_SECRET,
    });
    return { status: 200, body: JSON.stringify(creds) };
  });
}
