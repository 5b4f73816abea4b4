import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { corsOriginsSchema } from '../http/cors.js';

/**
 * The whole configuration, parsed once at start from an explicit environment table.
 * Modules receive the parsed `Config` (or a slice of it); nothing else reads process.env.
 */

const int = (def: number, min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.coerce.number().int().min(min).max(max).default(def);

const bool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));

const optionalUrl = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v))
  .pipe(z.url({ protocol: /^https?$/ }).optional());

export interface ClusterNode {
  host: string;
  port: number;
}

/** `host:port,host:port,...` (the seed nodes of a Redis Cluster). */
const clusterNodes = z
  .string()
  .optional()
  .transform((v, ctx): ClusterNode[] | undefined => {
    if (v === undefined || v.trim() === '') return undefined;
    const nodes: ClusterNode[] = [];
    for (const entry of v.split(',').map((e) => e.trim()).filter(Boolean)) {
      const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(entry);
      const port = Number(m?.[2]);
      if (!m || port < 1 || port > 65535) {
        ctx.addIssue({ code: 'custom', message: `"${entry}" is not host:port (a comma-separated list of seed nodes)` });
        return z.NEVER;
      }
      nodes.push({ host: m[1]!.replace(/^\[|\]$/g, ''), port });
    }
    return nodes;
  });

const roleList = z
  .string()
  .default('api,gateway,worker')
  .transform((v) => v.split(',').map((r) => r.trim()).filter(Boolean))
  .pipe(z.array(z.enum(['api', 'gateway', 'worker'])).min(1));

export const configSchema = z
  .object({
    HOST: z.string().default('0.0.0.0'),
    PORT: int(8080, 0, 65535),
    ROLES: roleList,
    /**
     * Prometheus metrics on a listener of their own, not the public port (README "Observability"):
     * loopback by default, so only the host (or the pod's sidecar/scraper) reaches it.
     */
    METRICS_HOST: z.string().default('127.0.0.1'),
    METRICS_PORT: int(9464, 0, 65535),
    /** OpenTelemetry tracing (README "Tracing"): `off` (default, costs nothing) or `otlp`. */
    TRACING: z.enum(['off', 'otlp']).default('off'),
    REDIS_URL: optionalUrl.or(optionalString),
    /**
     * How long a request waits for Redis before it answers 503 `unavailable` (a stalled Redis
     * must not hang requests; README "Operations").
     */
    REDIS_COMMAND_TIMEOUT_MS: int(500, 50, 60_000),
    /** Seed nodes of a Redis Cluster, instead of REDIS_URL (README "Redis Cluster"). */
    REDIS_CLUSTER_NODES: clusterNodes,
    REDIS_PREFIX: z.string().regex(/^[A-Za-z0-9_.-]{1,32}$/).default('cb'),
    /** Number of hash-tagged shards calls and their outboxes are spread over (Redis Cluster). */
    CALL_SHARDS: int(8, 1, 1024),

    AUTH_JWT_SECRET: optionalString,
    AUTH_JWT_PUBLIC_KEY: optionalString,
    AUTH_JWKS_URL: optionalUrl,
    AUTH_ISSUER: optionalString,
    AUTH_AUDIENCE: optionalString,

    RING_TIMEOUT_MS: int(45_000, 1_000, 45_000),
    CALL_RETENTION_MS: int(24 * 3600_000, 60_000),
    IDEMPOTENCY_TTL_MS: int(24 * 3600_000, 24 * 3600_000),
    /** Allow calling a user who is in an accepted call (else the new call ends at once as busy). */
    CALL_WAITING: bool(false),
    HANDLE_SCHEME: z.string().regex(/^[a-z][a-z0-9+.-]{0,31}$/).default('app'),
    BODY_LIMIT_BYTES: int(16 * 1024, 256, 1024 * 1024),

    EVENT_LOG_MAX_LEN: int(5000, 10, 1_000_000),
    EVENT_LOG_MAX_AGE_MS: int(24 * 3600_000, 10_000),
    RELAY_BATCH_SIZE: int(256, 1, 10_000),
    /**
     * Relay shard lease: a relay that died loses its shards after this long; the relay taking a
     * shard over processes the entries the dead one read but never acknowledged.
     */
    RELAY_CLAIM_IDLE_MS: int(5_000, 100),
    WS_IDLE_TIMEOUT_S: int(60, 8, 960),
    WS_MAX_MESSAGE_BYTES: int(4096, 256, 1024 * 1024),
    /** Open signaling sockets one user may hold on one gateway process (0: no cap). */
    WS_MAX_SOCKETS_PER_USER: int(20, 0, 100_000),
    /** Bytes a socket may have queued before it counts as a slow consumer and is closed (4008). */
    WS_MAX_BACKPRESSURE_BYTES: int(256 * 1024, 1024),

    /** Abuse limits (0 turns one off). */
    RATE_CALL_CREATES_PER_MIN: int(60, 0),
    /** Invitations one callee may receive per minute from all callers together (README "Abuse limits"). */
    RATE_INVITES_PER_CALLEE_PER_MIN: int(10, 0),
    RATE_PUSH_TOKEN_WRITES_PER_HOUR: int(60, 0),
    /** Renames per user per minute, and per call in all (each rename is an event in the callee's log). */
    RATE_RENAMES_PER_MIN: int(30, 0),
    RENAMES_PER_CALL: int(10, 1, 1000),
    /** In-call messages per call and sender per 10 s (README "In-call messages"). */
    RATE_CALL_MESSAGES_PER_10S: int(100, 0),
    RATE_WS_MESSAGES_PER_10S: int(50, 0),
    RATE_AUTH_FAILURES_PER_MIN: int(30, 0),
    /** Behind a proxy: the header carrying the client address (first entry), e.g. x-forwarded-for. */
    /** Browser origins allowed to call the API: a comma-separated list, or `*` (README "CORS"). */
    CORS_ORIGINS: corsOriginsSchema,
    /** Refuse (403) a signaling upgrade whose Origin header is not in CORS_ORIGINS (README "CORS"). */
    WS_CHECK_ORIGIN: bool(false),
    CLIENT_IP_HEADER: z.string().regex(/^[a-z0-9-]{1,64}$/, 'a lower-case header name').optional(),

    /** Concurrent push retry jobs per queue partition and worker process. */
    PUSH_CONCURRENCY: int(64, 1, 10_000),
    /**
     * BullMQ queue partitions (push retries, ring sweeps), each with its own hash tag so a Redis
     * Cluster spreads them over its primaries; at most CALL_SHARDS are used. Unset: see
     * defaultQueuePartitions.
     */
    QUEUE_PARTITIONS: z.preprocess((v) => (v === '' ? undefined : v), z.coerce.number().int().min(1).max(1024).optional()),
    /** How often the ring sweeps end due calls: an unanswered call ends about this late at most. */
    RING_SWEEP_TICK_MS: int(50, 5, 1000),

    TURN_SECRET: optionalString,
    TURN_URLS: z
      .string()
      .default('')
      .transform((v) => v.split(',').map((u) => u.trim()).filter(Boolean))
      .pipe(z.array(z.string().regex(/^(stun|stuns|turn|turns):/, 'each TURN_URLS entry must start with stun:, stuns:, turn: or turns:'))),
    MEDIA_CREDENTIAL_TTL_S: int(600, 30, 86_400),
    /** When true, the callee's media-session request on a ringing call is its answer claim. */
    MEDIA_SESSION_ANSWERS: bool(false),

    IOS_PUSH_URL: optionalUrl,
    IOS_PUSH_SANDBOX_URL: optionalUrl,
    IOS_PUSH_KEY_FILE: optionalString,
    IOS_PUSH_KEY_ID: optionalString,
    IOS_PUSH_TEAM_ID: optionalString,
    IOS_BUNDLE_ID: optionalString,
    ANDROID_PUSH_URL: optionalUrl,
    ANDROID_PROJECT_ID: optionalString,
    ANDROID_SERVICE_ACCOUNT_FILE: optionalString,
    /**
     * Several apps in one deployment (docs/push-apps.md): a JSON array of apps, each with its
     * `appId` and its iOS and/or Android providers. Unset (default): the single-app variables
     * above (IOS_BUNDLE_ID, ANDROID_PROJECT_ID, ...) make the one app, which takes any appId.
     */
    PUSH_APPS: optionalString,
    /** A file holding PUSH_APPS's JSON (docs/push-apps.md); set at most one of the two. */
    PUSH_APPS_FILE: optionalString,

    /** `production`: no silent defaults (no embedded Redis, no generated dev secret). */
    NODE_ENV: z.string().optional(),
    LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
    /** Run on uWebSockets.js's slow `ws` fallback when its native binary does not load. */
    ALLOW_UWS_FALLBACK: bool(false),
    /** Embedded Redis data directory, used when REDIS_URL is unset. */
    EMBEDDED_REDIS_DIR: z.string().default('.data/redis'),
    SHUTDOWN_TIMEOUT_MS: int(10_000, 100, 120_000),
    /**
     * After SIGTERM, how long to keep serving while /readyz already says not ready, so a load
     * balancer stops sending traffic before the listener closes (README "Operations").
     */
    SHUTDOWN_DRAIN_MS: int(0, 0, 60_000),
    /** Serve the browser softphone at /demo/ (README "Browser softphone"); off unless set. */
    DEMO: bool(false),
  })
  .superRefine((c, ctx) => {
    const sources = [c.AUTH_JWT_SECRET, c.AUTH_JWT_PUBLIC_KEY, c.AUTH_JWKS_URL].filter(Boolean).length;
    if (sources > 1) {
      ctx.addIssue({
        code: 'custom',
        path: ['AUTH_JWT_SECRET'],
        message: 'set only one of AUTH_JWT_SECRET, AUTH_JWT_PUBLIC_KEY, AUTH_JWKS_URL',
      });
    }
    if (c.REDIS_URL && c.REDIS_CLUSTER_NODES) {
      ctx.addIssue({ code: 'custom', path: ['REDIS_CLUSTER_NODES'], message: 'set only one of REDIS_URL and REDIS_CLUSTER_NODES' });
    }
    if (c.TURN_URLS.some((u) => /^turns?:/.test(u)) && !c.TURN_SECRET) {
      ctx.addIssue({ code: 'custom', path: ['TURN_SECRET'], message: 'required when TURN_URLS lists turn: or turns: servers' });
    }
    if (c.WS_CHECK_ORIGIN && !c.CORS_ORIGINS) {
      ctx.addIssue({ code: 'custom', path: ['WS_CHECK_ORIGIN'], message: 'needs CORS_ORIGINS (the list of allowed origins)' });
    }
    if (c.PUSH_APPS && c.PUSH_APPS_FILE) {
      ctx.addIssue({ code: 'custom', path: ['PUSH_APPS_FILE'], message: 'set only one of PUSH_APPS and PUSH_APPS_FILE' });
    }
    if (c.AUTH_JWT_SECRET !== undefined && Buffer.byteLength(c.AUTH_JWT_SECRET) < 32) {
      ctx.addIssue({ code: 'custom', path: ['AUTH_JWT_SECRET'], message: 'must be at least 32 bytes' });
    }
  });

export type Config = z.infer<typeof configSchema>;

/**
 * QUEUE_PARTITIONS when unset (README "Queues"): 1 on a single Redis, where more partitions only
 * multiply BullMQ's fixed cost (each partition's sweep job every second) and the sweeps' round
 * trips; 4 on a cluster, so the queues spread over its primaries.
 */
export function defaultQueuePartitions(cluster: boolean): number {
  return cluster ? 4 : 1;
}

/** The queue partitions in use: QUEUE_PARTITIONS or its default, at most CALL_SHARDS. */
export function queuePartitions(c: Pick<Config, 'QUEUE_PARTITIONS' | 'REDIS_CLUSTER_NODES' | 'CALL_SHARDS'>): number {
  return Math.min(c.QUEUE_PARTITIONS ?? defaultQueuePartitions(c.REDIS_CLUSTER_NODES !== undefined), c.CALL_SHARDS);
}
export type Role = Config['ROLES'][number];

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Parses the environment; the error message names every bad variable. */
export function loadConfig(env: Record<string, string | undefined>): Config {
  const picked: Record<string, string | undefined> = {};
  for (const key of Object.keys(configSchema.shape)) picked[key] = env[key];
  const result = configSchema.safeParse(picked);
  if (!result.success) {
    const lines = result.error.issues.map((i) => `  ${i.path.join('.') || '(config)'}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  return result.data;
}

/** True when neither a secret, a public key nor a JWKS URL is configured. */
export function authUnconfigured(c: Config): boolean {
  return !c.AUTH_JWT_SECRET && !c.AUTH_JWT_PUBLIC_KEY && !c.AUTH_JWKS_URL;
}

/* ---- Push apps (docs/push-apps.md) ---- */

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

const configError = (lines: string[]) => new ConfigError(`invalid configuration:\n${lines.map((l) => `  ${l}`).join('\n')}`);

/** Where in an app a zod issue is, by the app's appId when it has one: `app "x" ios.keyId`. */
function appPath(raw: unknown, path: readonly PropertyKey[]): string {
  const [index, ...rest] = path;
  if (typeof index !== 'number') return '(the list)';
  const entry = Array.isArray(raw) ? (raw[index] as { appId?: unknown } | undefined) : undefined;
  const name = typeof entry?.appId === 'string' && entry.appId ? `app "${entry.appId}"` : `app #${index + 1}`;
  return rest.length ? `${name} ${rest.map(String).join('.')}` : name;
}

/** Validates an app set (PUSH_APPS's JSON); the error names the app and the field. */
export function parsePushApps(json: string, source = 'PUSH_APPS'): PushApp[] {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw configError([`${source}: not JSON`]);
  }
  const result = pushAppsSchema.safeParse(raw);
  if (!result.success) {
    throw configError(result.error.issues.map((i) => `${source}: ${appPath(raw, i.path)}: ${i.message}`));
  }
  const seen = new Set<string>();
  for (const app of result.data) {
    if (seen.has(app.appId)) throw configError([`${source}: app "${app.appId}" appId: listed twice`]);
    seen.add(app.appId);
  }
  return result.data;
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
