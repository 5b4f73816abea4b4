import type { CallChange } from '../calls/change.js';
import { deliveriesFor } from '../events/audience.js';
import { isForInstallation } from '../events/delivery.js';
import { memberOf, wasAnswered, type GroupCall } from '../calls/model.js';
import { participants, type Participant } from '../calls/participants.js';
import { missedBy } from '../calls/missed.js';
import { missedPayload } from '../events/payloads.js';
import type { MissedCallAlerts } from '../config/pushApps.js';
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

/**
 * An app's missed-call alerts as far as they can go out: a platform is on only where the app has
 * its provider too. Undefined: the app sends none (or is not configured).
 */
export type AlertsOf = (appId: string) => MissedCallAlerts | undefined;

/** The users whose registrations `pushesFor` needs: never one the call policy screened, who gets no push. */
export function usersToLookUp(change: CallChange): string[] {
  const { call } = change;
  const invitees = inviteesOf(change);
  if (invitees) return invitees;
  if (call.kind === 'group') return groupUsersToLookUp(change, call).filter((u) => !memberOf(call, u)?.screened);
  // A screened callee is never pushed; the caller only gets an Android signal after an answer.
  if (call.screened) return [];
  if (change.kind === 'answered') return [call.calleeUserId, call.callerUserId];
  if (change.kind === 'renamed' || change.kind === 'ringing') return [];
  return wasAnswered(call) ? [] : [call.calleeUserId];
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
        if (reg.kind === 'iosAlert' || !enabled[reg.kind]) continue;
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
  // Those that stop an invitee's ringing, and a one-to-one caller's `call.accepted`.
  for (const d of deliveriesFor(change)) {
    if (!d.stopsRinging && d.payload.type !== 'call.accepted') continue;
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
  // A user the call policy screened is never rung (docs/call-policy.md).
  const rung = (p: Participant) => p.role === 'invitee' && p.state === 'invited' && !p.screened;
  if (change.kind === 'created') return participants(change.call).filter(rung).map((p) => p.userId);
  if (change.kind === 'invited') return participants(change.call).filter((p) => rung(p) && change.subjects?.includes(p.userId)).map((p) => p.userId);
  return undefined;
}

/** A group call: the invitees, and the members whose ringing a change stops (their Android signals). */
function groupUsersToLookUp(change: CallChange, call: GroupCall): string[] {
  if (change.kind === 'ended') return call.members.filter((m) => m.endedIn === 'invited' || m.endedIn === 'ringing').map((m) => m.userId);
  if (change.kind === 'joined' || change.kind === 'member') return change.subjects ?? [];
  return [];
}

/**
 * The missed-call alerts of one change (docs/protocol.md "Missed-call alerts"): for each member the
 * change made miss the call (src/calls/missed.ts: rung, never answered on any installation, not
 * busy, not declined), one alert per installation: to its `iosAlert` token, and to its
 * `androidPush` token, as its app allows. A busy member, one that declined, joined, or answered on
 * another installation is not in missedBy, so gets none. The id is one per call, installation and
 * kind: with the claim the dispatcher makes before the first attempt (missedCallClaims.ts), a
 * change relayed again sends no second alert.
 */
export function missedCallPushesFor(change: CallChange, registrationsOf: (userId: string) => readonly PushRegistration[], alertsOf: AlertsOf): PlannedPush[] {
  const out: PlannedPush[] = [];
  const { call } = change;
  // missedBy names no invitee its call policy screened, except one do not disturb silenced: that
  // call lands among the user's missed calls, and so gets its alert (docs/call-policy.md).
  for (const p of missedBy(change)) {
    for (const reg of registrationsOf(p.userId)) {
      if (reg.kind === 'iosVoip') continue;
      const alerts = alertsOf(reg.appId);
      if (!alerts || !(reg.kind === 'iosAlert' ? alerts.ios : alerts.android)) continue;
      out.push({
        id: `missed.${jobIdPart(call.callId)}.${jobIdPart(reg.installationId)}.${reg.kind}`,
        data: {
          t: 'missed',
          callId: call.callId,
          userId: reg.userId,
          installationId: reg.installationId,
          kind: reg.kind,
          payload: missedPayload(call, change.atMs, p.userId),
          deadlineMs: change.atMs + alerts.lifetimeMs,
        },
      });
    }
  }
  return out;
}
