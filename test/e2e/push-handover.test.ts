import { describe, expect, it } from 'vitest';
import { answer, end, uid } from '../support/fixtures.js';
import { createCall, waitUntil } from './helpers.js';
import { withoutAlerts, callpayloadOf, fcmTo, installation, phone, pushesSettled, pushStackForFile, type PushStack } from './push-helpers.js';

/**
 * The stop-ringing signals of a call whose invitation another worker relayed (docs/architecture.md
 * "Push"): the worker that sends them does not remember what the invitation rang, so it reads the
 * callee's registrations, as every worker did before it remembered them, and every Android
 * device that rang is still told.
 */

let ps: PushStack;

// The first server takes requests and sockets only; the workers come and go.
pushStackForFile(
  [],
  (s) => {
    ps = s;
  },
  { ROLES: 'api,gateway' },
);

describe('a worker that did not relay the invitation', () => {
  it('still sends the cancel and answeredElsewhere signals to every rung Android device, and call.accepted to the caller', async () => {
    // The worker that relays the invitations, stopped before their calls stop ringing.
    const first = await ps.stack.addServer({ ...ps.pushEnv, ROLES: 'worker' });
    const callerUserId = uid('caller');
    const callerAndroid = await phone(ps.url, callerUserId, 'androidPush');
    const [cancelledCallee, answeredCallee] = [uid('callee'), uid('callee')];
    const cancelledPhones = [await phone(ps.url, cancelledCallee, 'androidPush'), await phone(ps.url, cancelledCallee, 'androidPush')];
    const [winner, loser] = [await phone(ps.url, answeredCallee, 'androidPush'), await phone(ps.url, answeredCallee, 'androidPush')];
    const toCancel = await createCall(installation(ps.url, callerUserId), cancelledCallee);
    const toAnswer = await createCall(callerAndroid.d, answeredCallee);
    await waitUntil('the invitations, relayed by the first worker', () => [...cancelledPhones, winner, loser].every((p) => fcmTo(ps.fcm, p.token).length >= 1));
    await pushesSettled(ps, [toCancel.callId, toAnswer.callId]);

    await first.stop();
    await ps.stack.addServer({ ...ps.pushEnv, ROLES: 'worker' });

    const cancelled = await end(callerAndroid.d, toCancel.callId, 'localHangup');
    expect(cancelled.status, cancelled.text).toBe(200);
    const won = await answer(winner.d, toAnswer.callId);
    expect(won.status, won.text).toBe(200);
    await waitUntil(
      'the signals, from the second worker',
      () =>
        cancelledPhones.every((p) => fcmTo(ps.fcm, p.token, 'call.ended').length >= 1) &&
        fcmTo(ps.fcm, loser.token, 'call.ended').length >= 1 &&
        fcmTo(ps.fcm, callerAndroid.token, 'call.accepted').length >= 1,
      15_000,
    );
    await pushesSettled(ps, [toCancel.callId, toAnswer.callId]);

    for (const p of cancelledPhones) {
      expect(withoutAlerts(fcmTo(ps.fcm, p.token)).map((m) => callpayloadOf(m).type)).toEqual(['call.invited', 'call.ended']);
      expect(fcmTo(ps.fcm, p.token, 'call.missed')).toHaveLength(1);
      expect(callpayloadOf(fcmTo(ps.fcm, p.token, 'call.ended')[0]!)).toMatchObject({ callId: toCancel.callId, reason: 'callerCancelled' });
    }
    expect(callpayloadOf(fcmTo(ps.fcm, loser.token, 'call.ended')[0]!)).toMatchObject({ callId: toAnswer.callId, reason: 'answeredElsewhere' });
    expect(fcmTo(ps.fcm, winner.token).map((m) => callpayloadOf(m).type)).toEqual(['call.invited']);
  }, 60_000);
});
