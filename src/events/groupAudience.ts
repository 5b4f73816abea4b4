import { memberOf, STOPPED_BY_PHONE, wasAnswered, type GroupCall, type Member } from '../calls/model.js';
import { reasonForSide, type EndReason } from '../calls/reasons.js';
import type { CallChange } from '../calls/change.js';
import { endedPayload, invitationPayload, participantPayload, renamedPayload, ringingPayload } from './payloads.js';
import type { Delivery } from './delivery.js';
import { movedDeliveries } from './movedAudience.js';

/**
 * Who is told what about one change of a group call (docs/group-calls.md "Who receives what"):
 *  - a member still ringing is reached on every installation, a member in the call on its joined
 *    installation only, a member who is out (declined, missed, busy, left) not at all;
 *  - `call.participant` goes to every member in the call but the one it is about;
 *  - a member whose ringing stops gets `call.ended` with its own reason (`stopsRinging`: the
 *    Android push signal follows it).
 */
export function groupDeliveriesFor(change: CallChange, call: GroupCall): Delivery[] {
  const { atMs } = change;
  const members = call.members;
  const subjects = (change.subjects ?? []).flatMap((u) => memberOf(call, u) ?? []);
  const tellInCall = (about: Member): Delivery[] =>
    members.filter((m) => m.state === 'joined' && m.userId !== about.userId).map((m) => ({ userId: m.userId, only: m.installationId, payload: participantPayload(call, atMs, about) }));
  const stop = (m: Member, reason: Parameters<typeof endedPayload>[2], except?: string): Delivery => ({
    userId: m.userId,
    payload: endedPayload(call, atMs, reason, `ended.${m.userId}`),
    ...(except ? { except } : {}),
    stopsRinging: true,
  });
  /** What a `member` change tells the member itself: its other installations stop ringing (stopsRinging); one removed is told it is out. */
  const toMember = (m: Member): Delivery[] => {
    if (m.state === 'left' && m.removedFrom === 'joined') return [{ userId: m.userId, only: m.installationId, payload: endedPayload(call, atMs, 'remoteEnded', `ended.${m.userId}`) }];
    if (m.state === 'left' && m.removedFrom) return [stop(m, 'remoteEnded')];
    return stopsRinging(m, stop);
  };
  switch (change.kind) {
    case 'created':
      return members.filter((m) => m.state === 'invited').map((m) => ({ userId: m.userId, payload: invitationPayload(call, atMs, m) }));
    case 'invited':
      return subjects.flatMap((m) => [...(m.state === 'invited' ? [{ userId: m.userId, payload: invitationPayload(call, atMs, m) }] : []), ...tellInCall(m)]);
    case 'joined':
      return subjects.flatMap((m) => [
        // Its other installations stop ringing, as in a one-to-one answer.
        ...(m.joinedFrom === 'invited' || m.joinedFrom === 'ringing' ? [stop(m, 'answeredElsewhere', m.installationId)] : []),
        ...tellInCall(m),
      ]);
    case 'member':
      return subjects.flatMap((m) => [...toMember(m), ...tellInCall(m)]);
    case 'ringing':
      // The caller gets `call.ringing` as in a one-to-one call (its screen says "Ringing"), and,
      // like every member in the call, `call.participant`, so a participant list built from
      // `call.participant` alone shows the member ringing (docs/group-calls.md "Ringing receipts").
      return subjects.flatMap((m) => [{ userId: call.callerUserId, payload: ringingPayload(call, atMs, m.userId) }, ...tellInCall(m)]);
    case 'renamed':
      return members.flatMap((m) => {
        if (m.userId === call.callerUserId) return [];
        const payload = renamedPayload(call, atMs);
        if (m.state === 'joined') return [{ userId: m.userId, only: m.installationId, payload }];
        return m.state === 'invited' || m.state === 'ringing' ? [{ userId: m.userId, payload }] : [];
      });
    case 'ended':
      return endedDeliveries(call, atMs);
    case 'moved':
      return movedDeliveries(change);
    case 'answered':
      return [];
  }
}

/**
 * A `member` change that stopped a member's ringing: its phone declined (or reported busy or
 * unanswered), and its other installations are told that reason, as the callee's are in a
 * one-to-one call (docs/protocol.md "End reasons"); or it rang out, and all are told `unanswered`.
 */
function stopsRinging(m: Member, stop: (m: Member, reason: EndReason, except?: string) => Delivery): Delivery[] {
  if (m.state !== 'declined' && m.state !== 'busy' && m.state !== 'missed') return [];
  if (m.byInstallationId) return [stop(m, STOPPED_BY_PHONE[m.state], m.byInstallationId)];
  return m.state === 'missed' ? [stop(m, 'unanswered')] : [];
}

/** The end reaches every member that was ringing or in the call then, but the installation that ended it. */
function endedDeliveries(call: GroupCall, atMs: number): Delivery[] {
  const by = call.endedBy ?? 'system';
  const reason = call.endReason ?? 'remoteEnded';
  return call.members.flatMap((m): Delivery[] => {
    if (!m.endedIn) return [];
    const side = m.userId === call.callerUserId ? 'caller' : 'callee';
    // The caller's installation that ended it knows; its calling installation is told when another cancelled.
    if (side === 'caller' && by === 'caller' && m.installationId === call.endedByInstallationId) return [];
    const payload = endedPayload(call, atMs, reasonForSide(reason, by, wasAnswered(call), side), `ended.${m.userId}`);
    if (m.endedIn === 'joined') return [{ userId: m.userId, only: m.installationId, payload }];
    return [{ userId: m.userId, payload, stopsRinging: true }];
  });
}
