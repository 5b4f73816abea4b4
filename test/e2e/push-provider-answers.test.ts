import { describe, expect, it } from 'vitest';
import { uid } from '../support/fixtures.js';
import type { ApnsScriptedResponse } from '../support/apns-server.js';
import type { FcmScriptedResponse } from '../support/fcm-server.js';
import { createCall, waitUntil } from './helpers.js';
import {
  androidToken,
  apnsTo,
  fcmTo,
  iosToken,
  isRegistered,
  logRecords,
  registerAndroid,
  registerIos,
  startPushStack,
  type PushStack,
  type TokenKind,
  installation,
  phone,
} from './push-helpers.js';
import { forFile } from '../support/stack.js';

/**
 * Every documented provider answer, through the real server (docs/protocol.md "What is not sent,
 * retries and invalid tokens"): the token goes only where the provider says it will never work,
 * transient answers are retried, a provider that shuts the connection down gets the push once more
 * on a new one, and configuration errors are counted and logged by app. No answer changes the
 * call, and no log line carries a push token.
 */

let ps: PushStack;
forFile(() => startPushStack({ LOG_LEVEL: 'debug' }), (s) => {
  ps = s;
});

type Outcome =
  /** The registration is removed (the dispatcher logs it first). */
  | 'removed'
  /** A later attempt (retry job or resend) is accepted; the registration stays. */
  | 'delivered later'
  /** Logged and counted as the app's configuration error; the registration stays. */
  | 'misconfigured'
  /** Given up without touching the registration. */
  | 'rejected'
  /** Reported invalid, but the registration is newer than the provider's word: it stays. */
  | 'kept as newer';

const apnsCases: [string, ApnsScriptedResponse[], Outcome][] = [
  ['400 BadDeviceToken', [{ status: 400, reason: 'BadDeviceToken' }], 'removed'],
  ['400 DeviceTokenNotForTopic', [{ status: 400, reason: 'DeviceTokenNotForTopic' }], 'removed'],
  ['410 Unregistered, invalid since now', [{ status: 410, reason: 'Unregistered' }], 'removed'],
  ['410 Unregistered, invalid since before the registration', [{ status: 410, reason: 'Unregistered', timestampMs: Date.now() - 3_600_000 }], 'kept as newer'],
  ['403 ExpiredProviderToken (a fresh JWT is accepted)', [{ status: 403, reason: 'ExpiredProviderToken' }], 'delivered later'],
  ['403 InvalidProviderToken twice', [{ status: 403, reason: 'InvalidProviderToken' }, { status: 403, reason: 'InvalidProviderToken' }], 'misconfigured'],
  ['429 TooManyProviderTokenUpdates', [{ status: 429, reason: 'TooManyProviderTokenUpdates', retryAfterSeconds: 1 }], 'delivered later'],
  ['503 ServiceUnavailable', [{ status: 503, reason: 'ServiceUnavailable' }], 'delivered later'],
  ['503 Shutdown (a new connection)', [{ status: 503, reason: 'Shutdown' }], 'delivered later'],
  ['400 BadPriority', [{ status: 400, reason: 'BadPriority' }], 'rejected'],
];

const fcmCases: [string, FcmScriptedResponse[], Outcome][] = [
  ['404 UNREGISTERED', [{ status: 404, errorCode: 'UNREGISTERED' }], 'removed'],
  ['400 INVALID_ARGUMENT on message.token', [{ status: 400, errorCode: 'INVALID_ARGUMENT', message: 'Invalid registration token', fieldViolations: ['message.token'] }], 'removed'],
  ['400 INVALID_ARGUMENT on another field', [{ status: 400, errorCode: 'INVALID_ARGUMENT', message: "Invalid value at 'message.android.ttl'", fieldViolations: ['message.android.ttl'] }], 'rejected'],
  ['429 QUOTA_EXCEEDED with retry-after', [{ status: 429, errorCode: 'QUOTA_EXCEEDED', retryAfterSeconds: 1 }], 'delivered later'],
  ['503 UNAVAILABLE', [{ status: 503, errorCode: 'UNAVAILABLE' }], 'delivered later'],
  ['500 INTERNAL', [{ status: 500, errorCode: 'INTERNAL' }], 'delivered later'],
  ['403 SENDER_ID_MISMATCH', [{ status: 403, errorCode: 'SENDER_ID_MISMATCH' }], 'misconfigured'],
  ['401 THIRD_PARTY_AUTH_ERROR', [{ status: 401, errorCode: 'THIRD_PARTY_AUTH_ERROR' }], 'misconfigured'],
];

/** Every token this file registered: none may be logged. */
const tokens: string[] = [];

const logs = (): Record<string, any>[] => logRecords(ps.stack.servers.map((s) => s.logs()).join('\n'));

async function configurationErrors(provider: string, reason: string): Promise<number> {
  const text = await (await fetch(`${ps.stack.servers[0]!.metricsUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`calling_push_configuration_errors_total{provider="${provider}",app="default",reason="${reason}"}`));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

/** Rings a new callee with one device of `kind` whose first invitation gets the scripted answers, then checks the outcome. */
async function ringThrough(kind: TokenKind, answers: readonly { status: number; reason?: string; errorCode?: string }[], outcome: Outcome): Promise<void> {
  const caller = installation(ps.url, uid('caller'));
  const { d: callee, token } = await phone(ps.url, uid('callee'), kind);
  tokens.push(token);
  for (const a of answers) {
    if (kind === 'iosVoip') ps.apns.failNext(token, a as ApnsScriptedResponse);
    else ps.fcm.failNext(token, a as FcmScriptedResponse);
  }
  const provider = kind === 'iosVoip' ? 'apns' : 'fcm';
  const reason = answers[0]!.reason ?? answers[0]!.errorCode!;
  const errorsBefore = await configurationErrors(provider, reason);
  const statuses = () => (kind === 'iosVoip' ? apnsTo(ps.apns, token).map((r) => r.status) : fcmTo(ps.fcm, token).map((m) => m.status));

  const call = await createCall(caller, callee.userId);

  switch (outcome) {
    case 'removed':
    case 'kept as newer': {
      await waitUntil('the invalid-token report to be handled', () =>
        logs().some((r) => r.msg === 'push token reported invalid' && r.installationId === callee.installationId),
      );
      expect(await isRegistered(ps.stack, callee, kind)).toBe(outcome === 'kept as newer');
      expect(statuses()).toEqual([answers[0]!.status]);
      break;
    }
    case 'delivered later':
      await waitUntil('a later attempt to be accepted', () => statuses().includes(200), 10_000);
      expect(statuses()).toEqual([...answers.map((a) => a.status), 200]);
      expect(await isRegistered(ps.stack, callee, kind)).toBe(true);
      break;
    case 'misconfigured': {
      await waitUntil('the configuration error to be logged', () =>
        logs().some((r) => r.msg === "push provider refused the app's configuration" && r.provider === provider && r.reason === reason),
      );
      const line = logs().find((r) => r.msg === "push provider refused the app's configuration" && r.reason === reason)!;
      expect(line).toMatchObject({ level: 'error', provider, app: 'default' });
      expect(await configurationErrors(provider, reason)).toBe(errorsBefore + 1);
      expect(await isRegistered(ps.stack, callee, kind)).toBe(true);
      expect(statuses()).toEqual(answers.map((a) => a.status));
      break;
    }
    case 'rejected':
      await waitUntil('the rejection to be logged', () => logs().some((r) => r.msg === 'push rejected' && r.installationId === callee.installationId));
      expect(await isRegistered(ps.stack, callee, kind)).toBe(true);
      expect(statuses()).toEqual([answers[0]!.status]);
  }

  // No provider answer changes the call: it still rings, at the revision it was created with.
  const now = await caller.api.get(`/v1/calls/${call.callId}`);
  expect(now.status).toBe(200);
  expect(now.json).toMatchObject({ state: 'ringing', revision: call.snapshot['revision'] });
}

describe('APNs answers', () => {
  it.each(apnsCases)('%s', (_name, answers, outcome) => ringThrough('iosVoip', answers, outcome));
});

describe('FCM answers', () => {
  it.each(fcmCases)('%s', (_name, answers, outcome) => ringThrough('androidPush', answers, outcome));
});

describe('PUSH_PAYLOAD_KEY', () => {
  it('carries the invitation under the deployment\'s key on both platforms', async () => {
    const own = await startPushStack({ PUSH_PAYLOAD_KEY: 'acme_call' });
    try {
      const caller = installation(own.url, uid('caller'));
      const [iPhone, android] = [installation(own.url, 'callee-k'), installation(own.url, 'callee-k')];
      const [ios, fcmToken] = [iosToken(), androidToken()];
      await registerIos(iPhone, ios);
      await registerAndroid(android, fcmToken);
      const call = await createCall(caller, 'callee-k');
      await waitUntil('both invitations', () => apnsTo(own.apns, ios).length === 1 && own.fcm.messages.some((m) => m.token === fcmToken));
      // The fakes were told the key too: each would have refused a push without it (400).
      const push = apnsTo(own.apns, ios)[0]!;
      expect(push.status).toBe(200);
      expect(push.body).toEqual({ aps: {}, acme_call: expect.objectContaining({ type: 'call.invited', callId: call.callId }) });
      const message = own.fcm.messages.find((m) => m.token === fcmToken)!;
      expect(message.status).toBe(200);
      const data = (message.body as { message: { data: Record<string, string> } }).message.data;
      expect(Object.keys(data)).toEqual(['acme_call']);
      expect(JSON.parse(data['acme_call']!)).toMatchObject({ type: 'call.invited', callId: call.callId });
    } finally {
      await own.stop();
    }
  });
});

describe('logs', () => {
  it('carry no push token after every answer above', () => {
    expect(tokens.length).toBe(apnsCases.length + fcmCases.length);
    const text = ps.stack.servers.map((s) => s.logs()).join('\n');
    expect(tokens.filter((t) => text.includes(t))).toEqual([]);
  });
});
