import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { DEFAULT_APP_ID, missedCallAlertsOf, parsePushApps, pushApps } from '../../src/config/pushApps.js';

/** The app set (docs/push-apps.md): validated at start, errors naming the app and the field. */

const app = (appId: string, extra: Record<string, unknown> = {}) => ({
  appId,
  ios: { bundleId: appId, keyFile: '/keys/a.p8', keyId: 'KEYID12345', teamId: 'TEAM123456' },
  android: { projectId: 'proj', serviceAccountFile: '/keys/sa.json' },
  ...extra,
});

function errorOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('PUSH_APPS', () => {
  it('accepts apps with iOS, Android or both', () => {
    const apps = parsePushApps(JSON.stringify([app('com.a'), { appId: 'com.b', android: { projectId: 'p', serviceAccountFile: '/f' } }]));
    expect(apps.map((a) => [a.appId, a.ios?.bundleId, a.android?.projectId])).toEqual([
      ['com.a', 'com.a', 'proj'],
      ['com.b', undefined, 'p'],
    ]);
  });

  it('names the app and the field of a missing or bad value', () => {
    const bad = [app('com.a'), app('com.b', { ios: { bundleId: 'com.b', keyFile: '/k', teamId: 'T' } })];
    expect(errorOf(() => parsePushApps(JSON.stringify(bad)))).toMatch(/PUSH_APPS: app "com\.b" ios\.keyId: /);
    const noPlatform = [{ appId: 'com.c' }];
    expect(errorOf(() => parsePushApps(JSON.stringify(noPlatform)))).toMatch(/PUSH_APPS: app "com\.c" ios: needs ios and\/or android/);
    const unknownField = [app('com.d', { android: { projectId: 'p', serviceAccountFile: '/f', projectID: 'typo' } })];
    expect(errorOf(() => parsePushApps(JSON.stringify(unknownField)))).toMatch(/app "com\.d" android: .*projectID/);
    expect(errorOf(() => parsePushApps(JSON.stringify([{ ...app('x'), appId: 'bad id' }])))).toMatch(/app "bad id" appId: /);
    expect(errorOf(() => parsePushApps(JSON.stringify([{ ios: app('x').ios }])))).toMatch(/app #1 appId: /);
    expect(errorOf(() => parsePushApps(JSON.stringify([app('com.a'), app('com.a')])))).toMatch(/app "com\.a" appId: listed twice/);
    expect(errorOf(() => parsePushApps('{'))).toMatch(/PUSH_APPS: not JSON/);
    expect(errorOf(() => parsePushApps('[]'))).toMatch(/PUSH_APPS: \(the list\): lists no app/);
  });

  it('reads PUSH_APPS_FILE, and refuses the single-app variables beside an app set', () => {
    const config = loadConfig({ PUSH_APPS_FILE: '/etc/apps.json' });
    const read = (p: string) => {
      expect(p).toBe('/etc/apps.json');
      return JSON.stringify([app('com.a')]);
    };
    expect(pushApps(config, read)).toMatchObject({ anyAppId: false, apps: [{ appId: 'com.a' }] });
    expect(errorOf(() => pushApps(loadConfig({ PUSH_APPS_FILE: '/etc/apps.json' }), () => '[{}]'))).toMatch(/PUSH_APPS_FILE: app #1 appId: /);
    expect(errorOf(() => pushApps(loadConfig({ PUSH_APPS: JSON.stringify([app('com.a')]), IOS_BUNDLE_ID: 'com.x' })))).toMatch(
      /IOS_BUNDLE_ID: not allowed with PUSH_APPS/,
    );
    expect(() => loadConfig({ PUSH_APPS: '[]', PUSH_APPS_FILE: '/f' })).toThrow(/PUSH_APPS_FILE: set only one of PUSH_APPS and PUSH_APPS_FILE/);
  });

  it('without an app set, the single-app variables make the one default app, which takes any appId', () => {
    const config = loadConfig({ IOS_BUNDLE_ID: 'com.x', IOS_PUSH_KEY_FILE: '/k.p8', IOS_PUSH_KEY_ID: 'K', IOS_PUSH_TEAM_ID: 'T' });
    expect(pushApps(config)).toEqual({
      anyAppId: true,
      apps: [{ appId: DEFAULT_APP_ID, ios: { bundleId: 'com.x', keyFile: '/k.p8', keyId: 'K', teamId: 'T' } }],
    });
    expect(pushApps(loadConfig({}))).toEqual({ anyAppId: true, apps: [] });
    expect(errorOf(() => pushApps(loadConfig({ ANDROID_PROJECT_ID: 'p' })))).toMatch(/ANDROID_SERVICE_ACCOUNT_FILE: required when Android push is configured/);
  });
});

describe('PUSH_PAYLOAD_KEY', () => {
  it('defaults to callpayload and takes another key', () => {
    expect(loadConfig({}).PUSH_PAYLOAD_KEY).toBe('callpayload');
    expect(loadConfig({ PUSH_PAYLOAD_KEY: 'acme_call' }).PUSH_PAYLOAD_KEY).toBe('acme_call');
  });

  it.each(['aps', 'from', 'notification', 'message_type', 'google.data', 'gcm_x', '1key', 'has space', 'k'.repeat(65), ''])('refuses %j, naming the variable', (value) => {
    expect(errorOf(() => loadConfig({ PUSH_PAYLOAD_KEY: value }))).toMatch(/PUSH_PAYLOAD_KEY: /);
  });
});

describe('missed-call alerts per app (docs/push-apps.md "Missed-call alerts")', () => {
  const defaults = (env: Record<string, string> = {}) => loadConfig({ REDIS_URL: 'redis://127.0.0.1:1', ...env });

  it('on for both platforms by default, a day, MISSED_CALL', () => {
    expect(missedCallAlertsOf(defaults(), app('com.a'))).toEqual({ ios: true, android: true, lifetimeMs: 86_400_000, locKey: 'MISSED_CALL' });
  });

  it("the deployment's variables are every app's defaults; an app's own fields win", () => {
    const c = defaults({ MISSED_CALL_ALERTS: 'ios', MISSED_CALL_ALERT_LIFETIME_S: '3600', MISSED_CALL_ALERT_LOC_KEY: 'CALL_MISSED' });
    expect(missedCallAlertsOf(c, app('com.a'))).toEqual({ ios: true, android: false, lifetimeMs: 3_600_000, locKey: 'CALL_MISSED' });
    const [own] = parsePushApps(JSON.stringify([app('com.b', { missedCallAlerts: { ios: false, android: true, lifetimeSeconds: 120 } })]));
    expect(missedCallAlertsOf(c, own!)).toEqual({ ios: false, android: true, lifetimeMs: 120_000, locKey: 'CALL_MISSED' });
    expect(missedCallAlertsOf(defaults({ MISSED_CALL_ALERTS: 'off' }), app('com.a'))).toMatchObject({ ios: false, android: false });
  });

  it('refuses a bad value, naming the variable or the app and field', () => {
    expect(errorOf(() => defaults({ MISSED_CALL_ALERTS: 'ios,windows' }))).toMatch(/MISSED_CALL_ALERTS: /);
    expect(errorOf(() => defaults({ MISSED_CALL_ALERT_LIFETIME_S: '10' }))).toMatch(/MISSED_CALL_ALERT_LIFETIME_S: /);
    expect(errorOf(() => parsePushApps(JSON.stringify([app('com.a', { missedCallAlerts: { lifetimeSeconds: 30 * 86_400 } })])))).toMatch(
      /app "com\.a" missedCallAlerts\.lifetimeSeconds: /,
    );
    expect(errorOf(() => parsePushApps(JSON.stringify([app('com.a', { missedCallAlerts: { sound: 'x' } })])))).toMatch(/app "com\.a" missedCallAlerts/);
  });
});
