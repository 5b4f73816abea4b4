import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { configError, parseNamedList, type Config } from './config.js';

/** The apps push goes out for (docs/push-apps.md): PUSH_APPS, or the single-app variables. */

const nonEmpty = z.string().trim().min(1, 'required');
const httpsOrHttpUrl = z.url({ protocol: /^https?$/ });

const pushAppSchema = z
  .object({
    /** The appId registrations carry (PUT /v1/installations/{id}/push-tokens/{kind}). */
    appId: z.string().regex(/^[A-Za-z0-9._-]{1,255}$/, 'must be an app bundle ID or package name'),
    ios: z
      .object({
        /** The topic of its VoIP pushes is `<bundleId>.voip`. */
        bundleId: nonEmpty,
        /** The APNs .p8 key file, its key ID and the team ID. */
        keyFile: nonEmpty,
        keyId: nonEmpty,
        teamId: nonEmpty,
        /** Optional: other APNs origins than IOS_PUSH_URL / IOS_PUSH_SANDBOX_URL. */
        url: httpsOrHttpUrl.optional(),
        sandboxUrl: httpsOrHttpUrl.optional(),
      })
      .strict()
      .optional(),
    android: z
      .object({
        /** The FCM (Firebase) project and its service account's JSON key file. */
        projectId: nonEmpty,
        serviceAccountFile: nonEmpty,
        /** Optional: another FCM origin than ANDROID_PUSH_URL. */
        url: httpsOrHttpUrl.optional(),
      })
      .strict()
      .optional(),
    /**
     * The app's missed-call alerts (docs/protocol.md "Missed-call alerts"); a field left out takes
     * the deployment's default (MISSED_CALL_ALERTS, MISSED_CALL_ALERT_LIFETIME_S, MISSED_CALL_ALERT_LOC_KEY).
     */
    missedCallAlerts: z
      .object({
        ios: z.boolean().optional(),
        android: z.boolean().optional(),
        lifetimeSeconds: z.number().int().min(60).max(2_419_200).optional(),
        locKey: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, '1 to 64 letters, digits, `_`, `.` or `-`').optional(),
      })
      .strict()
      .optional(),
  })
  .strict()
  .refine((a) => a.ios !== undefined || a.android !== undefined, { message: 'needs ios and/or android', path: ['ios'] });

export const pushAppsSchema = z.array(pushAppSchema).min(1, 'lists no app');

export type PushApp = z.infer<typeof pushAppSchema>;

/**
 * The apps push goes out for. `anyAppId` is true for the single-app configuration (the IOS_* and
 * ANDROID_* variables): its one app takes registrations of any appId, as before apps existed.
 * With PUSH_APPS, only the listed appIds may register (docs/push-apps.md "Single-app compatibility").
 */
export interface PushApps {
  apps: PushApp[];
  anyAppId: boolean;
}

/** The appId of the single-app configuration's one app (it matches every registration). */
export const DEFAULT_APP_ID = '*';

const SINGLE_APP_VARS = {
  ios: ['IOS_PUSH_KEY_FILE', 'IOS_PUSH_KEY_ID', 'IOS_PUSH_TEAM_ID', 'IOS_BUNDLE_ID'],
  android: ['ANDROID_PROJECT_ID', 'ANDROID_SERVICE_ACCOUNT_FILE'],
} as const;

/** Validates an app set (PUSH_APPS's JSON); the error names the app and the field. */
export function parsePushApps(json: string, source = 'PUSH_APPS'): PushApp[] {
  return parseNamedList(json, source, pushAppsSchema, 'app', 'appId');
}

/** The configured apps: PUSH_APPS(_FILE), or the single-app variables as the one default app. */
export function pushApps(c: Config, readFile: (path: string) => string = (p) => readFileSync(p, 'utf8')): PushApps {
  const singleSet = [...SINGLE_APP_VARS.ios, ...SINGLE_APP_VARS.android].filter((v) => c[v]);
  if (c.PUSH_APPS || c.PUSH_APPS_FILE) {
    if (singleSet.length) throw configError(singleSet.map((v) => `${v}: not allowed with PUSH_APPS/PUSH_APPS_FILE (give it to an app there)`));
    let json = c.PUSH_APPS;
    if (json === undefined) {
      try {
        json = readFile(c.PUSH_APPS_FILE!);
      } catch (err) {
        throw configError([`PUSH_APPS_FILE: cannot read ${c.PUSH_APPS_FILE} (${(err as NodeJS.ErrnoException).code ?? 'error'})`]);
      }
    }
    return { apps: parsePushApps(json, c.PUSH_APPS ? 'PUSH_APPS' : 'PUSH_APPS_FILE'), anyAppId: false };
  }
  const app: PushApp = { appId: DEFAULT_APP_ID };
  for (const platform of ['ios', 'android'] as const) {
    const vars = SINGLE_APP_VARS[platform];
    const missing = vars.filter((v) => !c[v]);
    if (missing.length === vars.length) continue;
    if (missing.length) throw configError(missing.map((v) => `${v}: required when ${platform === 'ios' ? 'iOS' : 'Android'} push is configured`));
  }
  if (SINGLE_APP_VARS.ios.every((v) => c[v])) {
    app.ios = { bundleId: c.IOS_BUNDLE_ID!, keyFile: c.IOS_PUSH_KEY_FILE!, keyId: c.IOS_PUSH_KEY_ID!, teamId: c.IOS_PUSH_TEAM_ID! };
  }
  if (SINGLE_APP_VARS.android.every((v) => c[v])) {
    app.android = { projectId: c.ANDROID_PROJECT_ID!, serviceAccountFile: c.ANDROID_SERVICE_ACCOUNT_FILE! };
  }
  return { apps: app.ios || app.android ? [app] : [], anyAppId: true };
}

/** One app's missed-call alerts, its own fields over the deployment's defaults (docs/protocol.md "Missed-call alerts"). */
export interface MissedCallAlerts {
  ios: boolean;
  android: boolean;
  lifetimeMs: number;
  locKey: string;
}

export function missedCallAlertsOf(c: Pick<Config, 'MISSED_CALL_ALERTS' | 'MISSED_CALL_ALERT_LIFETIME_S' | 'MISSED_CALL_ALERT_LOC_KEY'>, app: PushApp): MissedCallAlerts {
  const platforms: readonly string[] = c.MISSED_CALL_ALERTS;
  const own = app.missedCallAlerts ?? {};
  return {
    ios: own.ios ?? platforms.includes('ios'),
    android: own.android ?? platforms.includes('android'),
    lifetimeMs: (own.lifetimeSeconds ?? c.MISSED_CALL_ALERT_LIFETIME_S) * 1000,
    locKey: own.locKey ?? c.MISSED_CALL_ALERT_LOC_KEY,
  };
}
