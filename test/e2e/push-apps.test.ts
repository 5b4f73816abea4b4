import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { device, expectProblem, uid, type Device } from '../support/fixtures.js';
import { makeApnsKey, startFakeApns, type FakeApns } from '../support/apns-server.js';
import { startFakeFcm, writeServiceAccountFile, type FakeFcm } from '../support/fcm-server.js';
import { startStack, type Stack } from '../support/stack.js';
import { createCall, waitUntil } from './helpers.js';
import { androidToken, apnsTo, fcmTo, iosToken, isRegistered, logRecords, pushesSettled } from './push-helpers.js';

/**
 * Several apps in one deployment (docs/push-apps.md): two apps, each with an iOS and an Android
 * provider of its own (its own fake APNs with its bundle ID, key and team, its own fake FCM with
 * its project and service account), configured by PUSH_APPS. Each push goes out with its
 * registration's app; the fakes refuse a wrong topic, key, team or project.
 */

interface App {
  appId: string;
  apns: FakeApns;
  fcm: FakeFcm;
}

let stack: Stack;
let apps: [App, App];
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'push-apps-'));
  const make = async (appId: string): Promise<{ app: App; config: object }> => {
    const key = makeApnsKey();
    const [apns, fcm] = await Promise.all([
      startFakeApns({ bundleId: appId, keyId: key.keyId, teamId: key.teamId, publicKey: key.publicKey }),
      startFakeFcm(),
    ]);
    const keyFile = join(dir, `AuthKey_${key.keyId}.p8`);
    writeFileSync(keyFile, key.privateKeyPem, { mode: 0o600 });
    const accountDir = mkdtempSync(join(dir, 'sa-'));
    return {
      app: { appId, apns, fcm },
      config: {
        appId,
        ios: { bundleId: appId, keyFile, keyId: key.keyId, teamId: key.teamId, url: apns.url, sandboxUrl: apns.url },
        android: { projectId: fcm.projectId, serviceAccountFile: writeServiceAccountFile(accountDir, fcm.serviceAccount.json), url: fcm.url },
      },
    };
  };
  const [a, b] = await Promise.all([make('com.example.consumer'), make('com.example.business')]);
  apps = [a.app, b.app];
  stack = await startStack({ PUSH_APPS: JSON.stringify([a.config, b.config]) });
});

afterAll(async () => {
  await stack?.stop();
  await Promise.all((apps ?? []).flatMap((a) => [a.apns.close(), a.fcm.close()]));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const path = (d: Device, kind: string) => `/v1/installations/${encodeURIComponent(d.installationId)}/push-tokens/${kind}`;

async function registerIn(app: App, d: Device, kind: 'iosVoip' | 'androidPush'): Promise<string> {
  const token = kind === 'iosVoip' ? iosToken() : androidToken();
  const body = kind === 'iosVoip' ? { token, appId: app.appId, iosEnvironment: 'production' } : { token, appId: app.appId };
  const res = await d.api.put(path(d, kind), body);
  expect(res.status, res.text).toBe(200);
  return token;
}



describe('several apps in one deployment', () => {
  it("a call rings each app's devices through that app's own providers, with its topic, key, team and project", async () => {
    const caller = device(stack.url, uid('caller'), uid('inst'));
    const callee = uid('callee');
    const [a, b] = apps;
    const devices = Array.from({ length: 4 }, () => device(stack.url, callee, uid('inst')));
    const iosA = await registerIn(a, devices[0]!, 'iosVoip');
    const iosB = await registerIn(b, devices[1]!, 'iosVoip');
    const androidA = await registerIn(a, devices[2]!, 'androidPush');
    const androidB = await registerIn(b, devices[3]!, 'androidPush');

    const call = await createCall(caller, callee);
    await waitUntil('every app to be rung', () =>
      apnsTo(a.apns, iosA).length > 0 && apnsTo(b.apns, iosB).length > 0 && fcmTo(a.fcm, androidA).length > 0 && fcmTo(b.fcm, androidB).length > 0,
    );
    await pushesSettled({ stack }, [call.callId]);
    // The fakes answer 200 only to their own app's topic, key ID, team and project.
    for (const [fake, token, app] of [[a.apns, iosA, a], [b.apns, iosB, b]] as const) {
      const sent = apnsTo(fake, token);
      expect(sent).toHaveLength(1);
      expect(sent[0]).toMatchObject({ status: 200, headers: { 'apns-topic': `${app.appId}.voip` } });
    }
    for (const [fake, token] of [[a.fcm, androidA], [b.fcm, androidB]] as const) {
      const sent = fcmTo(fake, token);
      expect(sent).toHaveLength(1);
      expect(sent[0]!.status).toBe(200);
    }
    // Nothing went to the other app's providers.
    expect(apnsTo(b.apns, iosA)).toHaveLength(0);
    expect(apnsTo(a.apns, iosB)).toHaveLength(0);
    expect(fcmTo(b.fcm, androidA)).toHaveLength(0);
    expect(fcmTo(a.fcm, androidB)).toHaveLength(0);
  });

  it("an invalid token in app A removes only that registration; app B's registrations stay", async () => {
    const caller = device(stack.url, uid('caller'), uid('inst'));
    const callee = uid('callee');
    const [a, b] = apps;
    const phone = device(stack.url, callee, uid('inst'));
    const other = device(stack.url, callee, uid('inst'));
    const iosA = await registerIn(a, phone, 'iosVoip');
    const androidB = await registerIn(b, phone, 'androidPush');
    const iosB = await registerIn(b, other, 'iosVoip');
    a.apns.setTokenState(iosA, 'unregistered');

    const call = await createCall(caller, callee);
    await waitUntil('the 410 from app A', () => apnsTo(a.apns, iosA).length >= 1);
    await waitUntil('the invalid-token report to be handled', () =>
      logRecords(stack.servers.map((s) => s.logs()).join('\n')).some((r) => r.msg === 'push token reported invalid' && r.installationId === phone.installationId),
    );
    await pushesSettled({ stack }, [call.callId]);
    expect(await isRegistered(stack, phone, 'iosVoip')).toBe(false);
    expect(await isRegistered(stack, phone, 'androidPush')).toBe(true);
    expect(await isRegistered(stack, other, 'iosVoip')).toBe(true);
    expect(apnsTo(b.apns, iosB)[0]).toMatchObject({ status: 200 });
    expect(fcmTo(b.fcm, androidB)[0]!.status).toBe(200);
  });

  it('a registration for an app the deployment does not have is refused, naming appId, and stores nothing', async () => {
    const d = device(stack.url, uid('user'), uid('inst'));
    const res = await d.api.put(path(d, 'iosVoip'), { token: iosToken(), appId: 'com.example.unknown', iosEnvironment: 'production' });
    expectProblem(res, 'invalid_request', 'appId: "com.example.unknown" is not an app of this deployment');
    expect(await isRegistered(stack, d, 'iosVoip')).toBe(false);
  });
});
