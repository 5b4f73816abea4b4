import { readFileSync } from 'node:fs';
import type { Config } from '../config/config.js';
import { missedCallAlertsOf, type PushApp, type PushApps } from '../config/pushApps.js';
import type { AlertsOf } from './planner.js';
import { ConfigError } from '../config/config.js';
import type { Logger } from '../util/logger.js';
import type { AppSenders, PushSenders } from './dispatcher.js';
import { Http2Pool } from './http2Pool.js';
import { ApnsSender } from './apns.js';
import { FcmSender } from './fcm.js';
import { parseServiceAccount } from './fcmAccessToken.js';

function readAppFile(field: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`invalid configuration:\n  ${field}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

/**
 * One app's senders, over an HTTP/2 pool of its own (docs/push-apps.md): each app signs with its
 * own key or service account, and one app's provider trouble never stalls another's connections.
 */
function appSenders(config: Config, app: PushApp, single: boolean, pool: Http2Pool): AppSenders {
  // The field names in errors: the single-app variables, or the app's own fields.
  const name = (field: string, variable: string) => (single ? variable : `app "${app.appId}" ${field}`);
  const out: AppSenders = { missedCallAlerts: missedCallAlertsOf(config, app) };
  if (app.ios) {
    const productionUrl = app.ios.url ?? config.IOS_PUSH_URL;
    const sandboxUrl = app.ios.sandboxUrl ?? config.IOS_PUSH_SANDBOX_URL;
    if (!productionUrl && !sandboxUrl) {
      throw new ConfigError('invalid configuration:\n  IOS_PUSH_URL: set IOS_PUSH_URL and/or IOS_PUSH_SANDBOX_URL');
    }
    out.apns = new ApnsSender({
      ...(productionUrl ? { productionUrl } : {}),
      ...(sandboxUrl ? { sandboxUrl } : {}),
      keyPem: readAppFile(name('ios.keyFile', 'IOS_PUSH_KEY_FILE'), app.ios.keyFile),
      keyId: app.ios.keyId,
      teamId: app.ios.teamId,
      bundleId: app.ios.bundleId,
      payloadKey: config.PUSH_PAYLOAD_KEY,
      pool,
    });
  }
  if (app.android) {
    const field = name('android.serviceAccountFile', 'ANDROID_SERVICE_ACCOUNT_FILE');
    let serviceAccount;
    try {
      serviceAccount = parseServiceAccount(readAppFile(field, app.android.serviceAccountFile));
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      throw new ConfigError(`invalid configuration:\n  ${field}: ${(err as Error).message}`);
    }
    const url = app.android.url ?? config.ANDROID_PUSH_URL;
    out.fcm = new FcmSender({ ...(url ? { url } : {}), projectId: app.android.projectId, serviceAccount, payloadKey: config.PUSH_PAYLOAD_KEY, pool });
  }
  return out;
}

/**
 * Builds the push senders of the configured apps (docs/push-apps.md). The single-app
 * configuration gives senders for every registration; PUSH_APPS gives senders by appId. A
 * platform no app configures is reported at start and its devices are rung over signaling only.
 */
export function createPushSenders(config: Config, apps: PushApps, logger: Logger): PushSenders {
  const pools: Http2Pool[] = [];
  const close = () => Promise.all(pools.map((p) => p.close())).then(() => undefined);
  const build = (app: PushApp) => {
    const pool = new Http2Pool();
    pools.push(pool);
    return appSenders(config, app, apps.anyAppId, pool);
  };
  let senders: PushSenders;
  if (apps.anyAppId) {
    senders = { ...(apps.apps[0] ? build(apps.apps[0]) : {}), close };
  } else {
    senders = { apps: new Map(apps.apps.map((a) => [a.appId, build(a)])), close };
  }
  const enabled = enabledKinds(senders);
  if (!enabled.iosVoip) logger.warn('iOS push is not configured (IOS_PUSH_* or PUSH_APPS): iOS devices are rung over signaling only');
  if (!enabled.androidPush) logger.warn('Android push is not configured (ANDROID_* or PUSH_APPS): Android devices are rung over signaling only');
  return senders;
}

/** The kinds some app can push to (the planner skips the others). */
export function enabledKinds(senders: PushSenders): { iosVoip: boolean; androidPush: boolean } {
  const all: AppSenders[] = senders.apps ? [...senders.apps.values()] : [senders];
  return { iosVoip: all.some((s) => s.apns !== undefined), androidPush: all.some((s) => s.fcm !== undefined) };
}

/**
 * The appIds a registration may carry, with the platforms each has (docs/push-apps.md); undefined
 * for the single-app configuration, which takes any appId.
 */
export function registrableApps(apps: PushApps): ReadonlyMap<string, { ios: boolean; android: boolean }> | undefined {
  if (apps.anyAppId) return undefined;
  return new Map(apps.apps.map((a) => [a.appId, { ios: a.ios !== undefined, android: a.android !== undefined }]));
}

/**
 * Each app's missed-call alerts as far as they can go out (planner.ts AlertsOf): a platform only
 * where the app has its provider. The single-app configuration answers for every appId.
 */
export function alertsOf(senders: PushSenders): AlertsOf {
  const of = (s: AppSenders | undefined) => {
    const a = s?.missedCallAlerts;
    if (!a) return undefined;
    const out = { ...a, ios: a.ios && s?.apns !== undefined, android: a.android && s?.fcm !== undefined };
    return out.ios || out.android ? out : undefined;
  };
  if (!senders.apps) {
    const only = of(senders);
    return () => only;
  }
  const byApp = new Map([...senders.apps].map(([id, s]) => [id, of(s)]));
  return (appId) => byApp.get(appId);
}
