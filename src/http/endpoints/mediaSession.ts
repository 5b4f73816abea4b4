import type { ApiDeps } from '../deps.js';
import type { Route } from '../router.js';
import { callRoute } from './callRoute.js';
import { parseJsonBody } from '../request.js';
import { mediaSessionBody } from '../../commands/schemas.js';
import { errors } from '../../commands/errors.js';
import { fingerprint, type Outcome } from '../../calls/store.js';
import { inCallInstallation, sideOf } from '../../calls/participants.js';
import { toSnapshot } from '../../calls/snapshot.js';
import { mediaCredentials } from '../../calls/mediaCredentials.js';
import { callReply, failureError } from '../../commands/callReply.js';
import { sfuOf } from '../../media/callMedia.js';
import type { SfuAccess } from '../../media/sfu.js';

/**
 * POST /v1/calls/{id}/media-session: short-lived TURN credentials for a participant of an
 * accepted call: the caller's calling installation or the answering installation. With
 * MEDIA_SESSION_ANSWERS, the callee's request on a ringing call is its answer claim (docs/protocol.md "Media session").
 * A group call (always, when an SFU is configured) and a one-to-one call in `sfu` mode
 * (MEDIA_MODE) also get the `sfu` member: the call's room and a credential for this installation
 * only (docs/api.md "Media session"); an SFU that fails answers 503 `sfu_unavailable` and leaves
 * the call as it is. In a group call only a member's joined installation gets credentials, and
 * without a configured SFU it gets 503 `sfu_unavailable` (docs/group-calls.md "Media").
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
    const sfu = sfuOf(deps.media, call);
    // TURN alone cannot carry a group's media: nothing relays offers among its devices.
    const noSfu = call.kind === 'group' && !sfu;

    if (call.state === 'ringing' && side === 'callee' && config.MEDIA_SESSION_ANSWERS) {
      // Refused before the claim, so a refusal changes nothing.
      if (noSfu) throw errors.noSfu();
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

    if (inCallInstallation(call, me.userId) !== me.installationId) {
      if (call.state === 'accepted' && side === 'callee' && call.kind === 'pair') {
        throw errors.answerConflict(toSnapshot(call, side));
      }
      throw notInCall(call.state);
    }
    if (noSfu) throw errors.noSfu();
    const creds = mediaCredentials({
      userId: me.userId,
      nowMs: Date.now(),
      ttlSeconds: config.MEDIA_CREDENTIAL_TTL_S,
      urls: config.TURN_URLS,
      secret: config.TURN_SECRET,
    });
    if (!sfu) return { status: 200, body: JSON.stringify(creds) };
    const participant = { callId, userId: me.userId, installationId: me.installationId };
    let access: SfuAccess;
    try {
      access = await sfu.admit(participant, creds.expiresAtMs);
    } catch {
      // Counted by the adapter (sfu_errors_total); the 503 is logged as a failed request.
      throw errors.sfuUnavailable();
    }
    // The call may have ended, or this member left it, while the credential was being issued, and
    // the relay emptied or removed the room before this request added to it: then this request
    // takes back what it did and admits no one. Best effort: should it fail, the credential
    // expires with the media session, and an ended call's room is private and empty.
    const after = await deps.calls.read(callId, me.userId);
    if (after.kind !== 'failure' && after.call.state === 'ended') {
      await sfu.closeRoom?.(callId).catch(() => {});
      throw notInCall('ended');
    }
    if (after.kind !== 'failure' && inCallInstallation(after.call, me.userId) !== me.installationId) {
      await sfu.evict?.(callId, [participant]).catch(() => {});
      throw notInCall(after.call.state);
    }
    return { status: 200, body: JSON.stringify({ ...creds, sfu: access }) };
  });
}

const notInCall = (state: string) => errors.forbidden(`media credentials are issued only to the installations in an accepted call; this call is ${state}`);
