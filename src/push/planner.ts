import type { CallChange } from '../calls/change.js';
import { deliveriesFor } from '../events/audience.js';
import { isForInstallation } from '../events/delivery.js';
import { memberOf, wasAnswered } from '../calls/model.js';
import type { PushRegistration } from './registry.js';
import type { PushMessage } from './queues.js';
import { jobIdPart } from './queues.js';

/**
 * Which push messages one change causes (docs/protocol.md "Push formats"):
 *  - created: a VoIP push to every iOS installation and a HIGH data message to every Android
 *    installation of the callee;
 *  - the call stops ringing (answered elsewhere, cancelled, declined on another device,
 *    unanswered): a NORMAL `call.ended` data message to each callee Android installation that
 *    was rung and is told over signaling, carrying the same payload as the signaling event;
 *  - answered: `call.accepted` to the caller's Android installations.
 * iOS never gets signals: every VoIP push must ring.
 */

/** How long an Android push signal may wait for a device: after a minute nothing rings any more. */
export const SIGNAL_TTL_MS = 60_000;

export interface PlannedPush {
  id: string;
  data: PushMessage;
}

export interface ProvidersEnabled {
  iosVoip: boolean;
  androidPush: boolean;
}

/** The users whose registrations `pushesFor` needs: never one the call policy screened, who gets no push. */
export function usersToLookUp(change: CallChange): string[] {
  if (change.call.group) return groupUsersToLookUp(change).filter((u) => !memberOf(change.call, u)?.screened);
  // A screened callee is never pushed; the caller only gets an Android signal after an answer.
  if (change.call.screened) return [];
  if (change.kind === 'created') return [change.call.calleeUserId];
  if (change.kind === 'answered') return [change.call.calleeUserId, change.call.callerUserId];
  if (change.kind === 'renamed' || change.kind === 'ringing') return [];
  return wasAnswered(change.call) ? [] : [change.call.calleeUserId];
}

export function pushesFor(
  change: CallChange,
  registrationsOf: (userId: string) => readonly PushRegistration[],
  enabled: ProvidersEnabled,
): PlannedPush[] {
  const { call } = change;
  const out: PlannedPush[] = [];
  const invitees = inviteesOf(change);
  if (invitees) {
    for (const userId of invitees) {
      for (const reg of registrationsOf(userId)) {
        if (!enabled[reg.kind]) continue;
        out.push({
          // A group call's late invitation rings again: its revision tells it from the first.
          id: `invite.${jobIdPart(call.callId)}${change.kind === 'invited' ? `.${call.revision}` : ''}.${jobIdPart(reg.installationId)}.${reg.kind}`,
          data: { t: 'invite', callId: call.callId, userId: reg.userId, installationId: reg.installationId, kind: reg.kind },
        });
      }
    }
    return out;
  }
  if (!enabled.androidPush || change.kind === 'renamed' || change.kind === 'ringing' || change.kind === 'moved') return out;
  // Signals follow the signaling deliveries of the change, so both say the same thing.
  const wasRinging = change.kind === 'answered' || !wasAnswered(call);
  for (const d of deliveriesFor(change)) {
    if (call.group) {
      if (!d.stopsRinging) continue;
    } else if (d.userId === call.calleeUserId ? !(wasRinging && d.payload.type === 'call.ended') : d.payload.type !== 'call.accepted') continue;
    for (const reg of registrationsOf(d.userId)) {
      if (reg.kind !== 'androidPush') continue;
      if (!isForInstallation(d.only, d.except, reg.installationId)) continue;
      out.push({
        id: `signal.${jobIdPart(d.payload.eventId)}.${jobIdPart(reg.installationId)}`,
        data: {
          t: 'signal',
          callId: call.callId,
          userId: reg.userId,
          installationId: reg.installationId,
          kind: 'androidPush',
          payload: d.payload,
          deadlineMs: change.atMs + SIGNAL_TTL_MS,
        },
      });
    }
  }
  return out;
}

/** Who a change invites: the callee of a new call, the invitees of a new or grown group call. */
function inviteesOf(change: CallChange): string[] | undefined {
  const { call } = change;
  // A user the call policy screened is never rung (docs/call-policy.md).
  if (change.kind === 'created') return call.group ? call.group.members.filter((m) => m.state === 'invited' && !m.screened).map((m) => m.userId) : call.screened ? [] : [call.calleeUserId];
  if (change.kind === 'invited') return (change.subjects ?? []).filter((u) => memberOf(call, u)?.state === 'invited' && !memberOf(call, u)?.screened);
  return undefined;
}

/** A group call: the invitees, and the members whose ringing a change stops (their Android signals). */
function groupUsersToLookUp(change: CallChange): string[] {
  const invitees = inviteesOf(change);
  if (invitees) return invitees;
  if (change.kind === 'ended') return change.call.group!.members.filter((m) => m.endedIn === 'invited' || m.endedIn === 'ringing').map((m) => m.userId);
  if (change.kind === 'joined' || change.kind === 'member') return change.subjects ?? [];
  return [];
}
