import { reasonForSide } from '../calls/reasons.js';
import { wasAnswered, type PairCall } from '../calls/model.js';
import type { CallChange } from '../calls/change.js';
import { acceptedPayload, endedPayload, invitationPayload, missedPayload, renamedPayload, ringingPayload } from './payloads.js';
import { missedBy } from '../calls/missed.js';
import { groupDeliveriesFor } from './groupAudience.js';
import { movedDeliveries } from './movedAudience.js';
import type { Delivery } from './delivery.js';
import { screenedUserIds } from '../calls/participants.js';

/**
 * Who is told what about one change: the single source of the audience rules (docs/api.md
 * "Who receives what"; a group call's: groupAudience.ts). A participant the call policy screened
 * is told nothing (docs/call-policy.md), except that a call do not disturb silenced reaches it
 * once, as a `call.missed` when it stops ringing: a missed call, found in the log like any other.
 */
export function deliveriesFor(change: CallChange): readonly Delivery[] {
  let out = decided.get(change);
  if (!out) decided.set(change, (out = decide(change)));
  return out;
}

/** Each relayed change's deliveries, decided once: its log append and its push signals both read them. */
const decided = new WeakMap<CallChange, readonly Delivery[]>();

function decide(change: CallChange): Delivery[] {
  const all = change.call.kind === 'group' ? groupDeliveriesFor(change, change.call) : pairDeliveriesFor(change, change.call);
  const screened = screenedUserIds(change.call);
  if (screened.size === 0) return all;
  const silenced = missedBy(change).filter((p) => p.screened === 'silenced');
  return [...all.filter((d) => !screened.has(d.userId)), ...silenced.map((p) => ({ userId: p.userId, payload: missedPayload(change.call, change.atMs, p.userId) }))];
}

/**
 * The eventId tag of a one-to-one call's `call.ended` for its caller, who never misses its own
 * call: a gateway marks no such end seen (src/push/missedCallSeen.ts).
 */
export const CALLER_END_TAG = 'ended-caller';

function pairDeliveriesFor(change: CallChange, call: PairCall): Delivery[] {
  const { atMs } = change;
  const caller = call.callerUserId;
  const callee = call.calleeUserId;
  switch (change.kind) {
    case 'created':
      // Ringing: every device of the callee (over signaling; pushes are planned apart).
      return [{ userId: callee, payload: invitationPayload(call, atMs) }];
    case 'answered': {
      const winner = call.answeredByInstallationId ?? '';
      return [
        // The caller's devices learn the answer. The winning device is not told its own answer
        // (it has the HTTP response; docs/protocol.md "What the app does with an event").
        { userId: caller, payload: acceptedPayload(call, atMs) },
        // Every other device of the callee stops ringing, including ones that already got a 409.
        { userId: callee, payload: endedPayload(call, atMs, 'answeredElsewhere', 'elsewhere'), except: winner, stopsRinging: true },
      ];
    }
    case 'renamed': {
      // The callee's phones show the name: every ringing device, or the one in the call.
      const winner = call.answeredByInstallationId;
      const payload = renamedPayload(call, atMs);
      return [winner ? { userId: callee, payload, only: winner } : { userId: callee, payload }];
    }
    case 'ringing':
      // The callee's phone shows the call: the caller's devices can say "Ringing".
      return [{ userId: caller, payload: ringingPayload(call, atMs, callee) }];
    case 'joined':
    case 'member':
    case 'invited':
      // Group call changes only.
      return [];
    case 'moved':
      return movedDeliveries(change);
    case 'ended': {
      const by = call.endedBy ?? 'system';
      const reason = call.endReason ?? 'remoteEnded';
      const accepted = wasAnswered(call);
      const forCaller = endedPayload(call, atMs, reasonForSide(reason, by, accepted, 'caller'), CALLER_END_TAG);
      const forCallee = endedPayload(call, atMs, reasonForSide(reason, by, accepted, 'callee'), 'ended-callee');
      const winner = call.answeredByInstallationId;
      // Busy: the call never rang; only the caller learns why.
      if (by === 'system' && reason === 'busy') return [{ userId: caller, payload: forCaller }];
      if (by === 'system') {
        // Ring timeout (or busy): both sides; after an answer only the devices in the call.
        return [
          { userId: caller, payload: forCaller },
          accepted && winner ? { userId: callee, payload: forCallee, only: winner } : { userId: callee, payload: forCallee, stopsRinging: true },
        ];
      }
      if (by === 'caller') {
        // Cancel before answer: every callee device stops ringing. Hang-up: the answering device.
        return [accepted && winner ? { userId: callee, payload: forCallee, only: winner } : { userId: callee, payload: forCallee, stopsRinging: true }];
      }
      // The callee ended: the caller is told; while ringing, the callee's other devices stop too.
      const out: Delivery[] = [{ userId: caller, payload: forCaller }];
      if (!accepted) out.push({ userId: callee, payload: forCallee, except: call.endedByInstallationId ?? '', stopsRinging: true });
      return out;
    }
  }
}
