import { z } from 'zod';
import { corsOriginsSchema } from './cors.js';
import { MESSAGE_MAX_BYTES } from './messageLimits.js';
import { serverKeyHashesSchema } from '../auth/serverKeys.js';
import { DEFAULT_LOG_BUFFER_MAX_BYTES } from '../util/logger.js';

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

/** The push payload key the calling library reads unless a deployment sets PUSH_PAYLOAD_KEY. */
/** GROUP_CALL_MAX_MEMBERS when unset (docs/group-calls.md). */
export const GROUP_CALL_MAX_MEMBERS_DEFAULT = 16;
export const DEFAULT_PUSH_PAYLOAD_KEY = 'callpayload';
const PAYLOAD_KEY = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;
const RESERVED_PAYLOAD_KEY = /^(aps|from|notification|message_type|collapse_key|google.*|gcm.*)$/i;

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));

const optionalUrl = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v))
  .pipe(z.url({ protocol: /^https?$/ }).optional());

/** A comma-separated list of URLs with these protocols (empty: none). */
const urlList = (protocol: RegExp) =>
  z
    .string()
    .default('')
    .transform((v) => v.split(',').map((u) => u.trim()).filter(Boolean))
    .pipe(z.array(z.url({ protocol })));

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
    HOST: z.string().default('0.0.0.0').describe('Address the HTTP and WebSocket listener binds.'),
    PORT: int(8080, 0, 65535).describe('Port of the HTTP and WebSocket listener (0: any free port, logged in the `listening` line).'),
    ROLES: roleList.describe('Roles of this process, comma-separated: `api` (HTTP API), `gateway` (WebSockets), `worker` (outbox relay, push sender, ring sweeps).'),
    METRICS_HOST: z.string().default('127.0.0.1').describe('Address of the Prometheus metrics listener, kept off the public port (`0.0.0.0` inside a container; see docs/operations.md "Observability").'),
    METRICS_PORT: int(9464, 0, 65535).describe('Port of the metrics listener (0: any free port, logged in the `listening` line); give each process on one host its own.'),
    TRACING: z.enum(['off', 'otlp']).default('off').describe('`otlp` sends OpenTelemetry traces to `OTEL_EXPORTER_OTLP_ENDPOINT`; `off` costs nothing (docs/operations.md "Tracing").'),
    REDIS_URL: optionalUrl.or(optionalString).describe('Redis to use. Unset (and no cluster): `npm run dev` starts an embedded `redis-server` child; with `NODE_ENV=production` that is a start error.'),
    REDIS_COMMAND_TIMEOUT_MS: int(500, 50, 60_000).describe('How long a request waits for Redis before it answers 503 `unavailable`, so a stalled Redis does not hang requests.'),
    REDIS_CLUSTER_NODES: clusterNodes.describe('Seed nodes of a Redis Cluster, `host:port,host:port,...`, instead of `REDIS_URL` (docs/operations.md "Redis Cluster").'),
    REDIS_PREFIX: z.string().regex(/^[A-Za-z0-9_.-]{1,32}$/).default('cb').describe('Prefix of every key the backend writes.'),
    CALL_SHARDS: int(8, 1, 1024).describe('Hash-tag shards that calls, their outboxes and ring indexes are spread over (the relays share them by leases).'),

    AUTH_JWT_SECRET: optionalString.describe('HS256 secret that device tokens are verified with (at least 32 bytes). Exactly one of the three `AUTH_JWT_*` / `AUTH_JWKS_URL` is set.'),
    AUTH_JWT_PUBLIC_KEY: optionalString.describe('PEM public key (RS256, ES256 or EdDSA) that device tokens are verified with.'),
    AUTH_JWKS_URL: optionalUrl.describe('JWKS URL whose keys device tokens are verified with.'),
    AUTH_ISSUER: optionalString.describe('Required `iss` claim of device tokens, when set.'),
    AUTH_AUDIENCE: optionalString.describe('Required `aud` claim of device tokens, when set.'),

    SERVER_API_KEYS: serverKeyHashesSchema.describe('Hashes of the server API keys the app\'s own backend uses (docs/server-api.md), comma-separated `sha256:<hex>`; `npm run server-key` makes a key and its hash. Empty: the server API refuses every request.'),

    RING_TIMEOUT_MS: int(45_000, 1_000, 45_000).describe('Ring window: a call nobody answers ends as `unanswered` after this long (1000–45000).'),
    CALL_RETENTION_MS: int(24 * 3600_000, 60_000).describe('How long an ended call is kept (its snapshot stays readable).'),
    CALL_RECORD_RETENTION_DAYS: z.coerce.number().positive().max(3650).default(30).describe('How long call history is kept, in days (fractions allowed): each party\'s record of each ended call (docs/call-history.md).'),
    IDEMPOTENCY_TTL_MS: int(24 * 3600_000, 1000).describe('How long operation outcomes are kept for replays. Below 24 h a warning is logged at start: a client retry after this window is taken as a new request (docs/api.md "Idempotency").'),
    PUSH_REGISTRATION_IDLE_DAYS: z.coerce.number().positive().max(3650).default(270).describe('A user\'s push registrations expire this many days (fractions allowed) after their last registration write, FCM\'s own age for an inactive token; apps register at every launch, so only installations unused that long stop being rung (docs/keyspace.md "Push registrations").'),
    CALL_RECORD_FORMAT: z
      .enum(['string', 'hash'])
      .default('string')
      .describe('How new calls are stored: `string` (one key write per change) or `hash`, the form versions before 2026-11-26 read; set `hash` while upgrading from one of those with processes of both versions running, then `string` (docs/operations.md "Upgrading"). A call keeps the form it was created in.'),
    CALL_WAITING: bool(false).describe('Allow calling a user who is in an accepted call; otherwise the new call ends at once as `busy`.'),
    SCREENED_CALL_REPLY: z
      .enum(['unanswered', 'busy'])
      .default('unanswered')
      .describe("What the caller of a call the callee's policy stops is shown (docs/call-policy.md): `unanswered` (it rings out at the end of the ring window) or `busy` (it ends at once)."),
    HANDLE_SCHEME: z.string().regex(/^[a-z][a-z0-9+.-]{0,31}$/).default('app').describe('Scheme of the caller handle in invitations (`<scheme>:<userId>`).'),
    BODY_LIMIT_BYTES: int(16 * 1024, 256, 1024 * 1024).describe('Largest request body, in bytes (413 above it).'),

    EVENT_LOG_MAX_LEN: int(5000, 10, 1_000_000).describe('Events kept per user in the event log (docs/api.md "Abuse limits" gives the window this guarantees).'),
    EVENT_LOG_MAX_AGE_MS: int(24 * 3600_000, 10_000).describe('Age of the oldest event kept per user.'),
    RELAY_BATCH_SIZE: int(256, 1, 10_000).describe('Outbox entries per relay read.'),
    RELAY_GATHER_MS: int(5, 0, 1000).describe('After a read that returned changes, a relay waits this long before its next read, so that changes made meanwhile share a batch (one read, one append call, one log notice; docs/architecture.md "Relays"). A change that comes to an idle shard is relayed at once; under load one waits at most this long, in its pushes, webhooks and log copies. 0: read again at once.'),
    RELAY_CLAIM_IDLE_MS: int(5_000, 100).describe('Relay shard lease: a relay that died loses its shards after this long, and the relay taking a shard over processes the entries the dead one read but never acknowledged.'),
    WS_IDLE_TIMEOUT_S: int(60, 8, 960).describe('Close sockets silent this long, in seconds (server pings keep live ones open).'),
    WS_MAX_MESSAGE_BYTES: int(MESSAGE_MAX_BYTES, 256, 1024 * 1024).describe('Largest frame a client may send, in bytes (1009 above it). The default fits an in-call message of the largest payload (16 KiB, a video SDP offer), as the HTTP route does.'),
    WS_ADMISSIONS_PER_S: int(1000, 0, 1_000_000).describe('New signaling sockets one gateway process takes per second, one second\'s worth at once; beyond it a socket is closed at once with 1013 and a time to come back, spaced so that a crashed gateway\'s devices return as a queue (docs/signaling.md "A reconnect storm"; 0: no limit).'),
    WS_MAX_SOCKETS_PER_USER: int(20, 0, 100_000).describe('Open signaling sockets one user may hold on one gateway process (0: no cap).'),
    WS_MAX_BACKPRESSURE_BYTES: int(256 * 1024, 1024).describe('Bytes a socket may have queued before it counts as a slow consumer and is closed with 4008.'),

    RATE_CALL_CREATES_PER_MIN: int(60, 0).describe('Calls one user may create per minute (0: off).'),
    RATE_INVITES_PER_CALLEE_PER_MIN: int(10, 0).describe('Invitations one callee may receive per minute from all callers together (0: off; docs/api.md "Abuse limits").'),
    RATE_PUSH_TOKEN_WRITES_PER_HOUR: int(60, 0).describe('Push token writes per installation per hour (0: off).'),
    RATE_RENAMES_PER_MIN: int(30, 0).describe("Renames per user per minute (0: off); each rename is an event in the callee's log."),
    RENAMES_PER_CALL: int(10, 1, 1000).describe('Renames allowed per call in all.'),
    GROUP_CALL_MAX_MEMBERS: int(GROUP_CALL_MAX_MEMBERS_DEFAULT, 1, 64).describe('Members a group call may ring besides its caller, late invitations included (docs/group-calls.md).'),
    RATE_CALL_MESSAGES_PER_10S: int(100, 0).describe('In-call messages per call and sender per 10 s (0: off; docs/api.md "In-call messages").'),
    RATE_CALL_SIGNALS_PER_S: int(100, 0).describe('Live signals per call per second, all senders together (0: off; docs/signaling.md "Live signals").'),
    RATE_WS_MESSAGES_PER_10S: int(50, 0).describe('Frames per socket per 10 s (0: off).'),
    RATE_AUTH_FAILURES_PER_MIN: int(30, 0).describe('Failed authentications per client address per minute before it is refused with 429 (0: off).'),
    CORS_ORIGINS: corsOriginsSchema.describe('Browser origins allowed to call the API: a comma-separated list, or `*` (docs/api.md "CORS").'),
    WS_CHECK_ORIGIN: bool(false).describe('Refuse (403) a signaling upgrade whose Origin header is not in `CORS_ORIGINS`.'),
    CLIENT_IP_HEADER: z.string().regex(/^[a-z0-9-]{1,64}$/, 'a lower-case header name').optional().describe('Behind a proxy: the lower-case header that carries the client address (its first entry), e.g. `x-forwarded-for`.'),

    PUSH_CONCURRENCY: int(64, 1, 10_000).describe('Push retry jobs run at once per queue partition and worker process.'),
    QUEUE_PARTITIONS: z.preprocess((v) => (v === '' ? undefined : v), z.coerce.number().int().min(1).max(1024).optional()).describe('BullMQ queue partitions (push retries, ring sweeps), each with its own hash tag so a Redis Cluster spreads them; at most `CALL_SHARDS` are used. Unset: 1 on a single Redis, 4 on a cluster (docs/architecture.md "Queues").'),
    RING_SWEEP_TICK_MS: int(50, 5, 1000).describe('How often the ring sweeps end due calls: an unanswered call ends about this late at most.'),

    TURN_SECRET: optionalString.describe('TURN REST API shared secret (coturn `static-auth-secret`); required when `TURN_URLS` lists `turn:` or `turns:` servers.'),
    TURN_URLS: z
      .string()
      .default('')
      .transform((v) => v.split(',').map((u) => u.trim()).filter(Boolean))
      .pipe(z.array(z.string().regex(/^(stun|stuns|turn|turns):/, 'each TURN_URLS entry must start with stun:, stuns:, turn: or turns:'))).describe('Comma-separated `stun:`, `stuns:`, `turn:` or `turns:` URLs handed out in media sessions.'),
    MEDIA_CREDENTIAL_TTL_S: int(600, 30, 86_400).describe('Lifetime of TURN credentials, in seconds.'),
    MEDIA_SESSION_ANSWERS: bool(false).describe("The callee's media-session request on a ringing call is its answer claim."),
    MEDIA_MODE: z.enum(['p2p', 'sfu']).default('p2p').describe('Media of one-to-one calls: `p2p` (one peer connection between the two devices, over `TURN_URLS`) or `sfu` (each device connects to the call\'s room on the SFU named by `SFU`; docs/operations.md "SFU media").'),
    SFU: z.enum(['janus', 'livekit']).default('janus').describe('The SFU of group calls (when its settings are given) and of `sfu` media: `janus` (its VideoRoom plugin; `JANUS_*`) or `livekit` (access tokens; `LIVEKIT_*`).'),
    JANUS_URLS: urlList(/^https?$/).describe('Janus HTTP API URLs the backend manages rooms through, comma-separated (e.g. `http://10.0.0.5:8088/janus`); a call\'s room is placed on one by a rendezvous hash of its callId (docs/operations.md "SFU media").'),
    JANUS_CLIENT_URLS: urlList(/^(https?|wss?)$/).describe('The URL clients reach each of `JANUS_URLS` at (its WebSocket or HTTP transport), in the same order; empty: the `JANUS_URLS` themselves.'),
    JANUS_API_SECRET: optionalString.describe('Janus `api_secret` (janus.jcfg): the backend\'s own requests carry it.'),
    JANUS_TOKEN_SECRET: optionalString.describe('Janus `token_auth_secret` (janus.jcfg, with `token_auth = true`): media credentials are tokens signed with it.'),
    JANUS_ADMIN_KEY: optionalString.describe('VideoRoom `admin_key` (janus.plugin.videoroom.jcfg): only the backend creates rooms; room secrets are derived from it.'),
    JANUS_TIMEOUT_MS: int(3000, 100, 60_000).describe('How long the backend waits for Janus before media-session answers 503 `sfu_unavailable`.'),
    SFU_ROOM_PUBLISHERS: int(16, 2, 256).describe('Publishers a Janus room admits at once.'),
    LIVEKIT_URL: z.string().optional().transform((v) => (v === undefined || v.trim() === '' ? undefined : v)).pipe(z.url({ protocol: /^(wss?|https?)$/ }).optional()).describe('The LiveKit server URL clients connect to (`wss://...`).'),
    LIVEKIT_API_KEY: optionalString.describe('LiveKit API key that access tokens are issued under.'),
    LIVEKIT_API_SECRET: optionalString.describe('The secret of `LIVEKIT_API_KEY`.'),

    IOS_PUSH_URL: optionalUrl.describe('APNs production origin (`https://api.push.apple.com`, or `http://` for a local HTTP/2 test provider).'),
    IOS_PUSH_SANDBOX_URL: optionalUrl.describe('APNs development origin, for tokens registered with `iosEnvironment: development`.'),
    IOS_PUSH_KEY_FILE: optionalString.describe('The APNs .p8 signing key file.'),
    IOS_PUSH_KEY_ID: optionalString.describe('Key ID of the .p8 key.'),
    IOS_PUSH_TEAM_ID: optionalString.describe('Apple team ID.'),
    IOS_BUNDLE_ID: optionalString.describe("The app's bundle ID; VoIP pushes go to the topic `<bundle>.voip`."),
    ANDROID_PUSH_URL: optionalUrl.describe('FCM HTTP v1 origin (`https://fcm.googleapis.com`, or `http://` for a local test provider).'),
    ANDROID_PROJECT_ID: optionalString.describe('FCM project ID.'),
    ANDROID_SERVICE_ACCOUNT_FILE: optionalString.describe('Service-account JSON file (`client_email`, `private_key`, `token_uri`) for FCM access tokens.'),
    PUSH_PAYLOAD_KEY: z
      .string()
      .default(DEFAULT_PUSH_PAYLOAD_KEY)
      .refine((v) => PAYLOAD_KEY.test(v), 'letters, digits, `_`, `-` or `.`, starting with a letter or `_`, at most 64')
      .refine((v) => !RESERVED_PAYLOAD_KEY.test(v), 'a name Apple or FCM reserves (`aps`, `from`, `notification`, `message_type`, `collapse_key`, or starting with `google` or `gcm`)')
      .describe("The key of the push body (APNs) and data (FCM) that carries the event for the app's calling library (docs/protocol.md \"Push formats\")."),
    MISSED_CALL_ALERTS: z
      .string()
      .default('ios,android')
      .transform((v) => v.split(',').map((p) => p.trim()).filter(Boolean))
      .pipe(z.union([z.tuple([z.literal('off')]), z.array(z.enum(['ios', 'android']))]))
      .describe('Which platforms get a missed-call alert when a member who was rung never answered (docs/protocol.md "Missed-call alerts"): `ios,android` (default), `ios`, `android`, or `off`. The default of every app; an app of `PUSH_APPS` may set its own (`missedCallAlerts`).'),
    MISSED_CALL_ALERT_LIFETIME_S: int(86_400, 60, 2_419_200).describe('How long a missed-call alert waits for a device that is offline, in seconds: its `apns-expiration` and its FCM ttl (default 24 h; at most FCM\'s 4 weeks).'),
    MISSED_CALL_ALERT_GRACE_MS: int(2_000, 0, 30_000).describe('How long a missed-call alert to an installation that sent a ringing receipt waits before its first attempt, so that the end written to its socket is noted first and the alert skipped (docs/protocol.md "Missed-call alerts"); 0 sends at once (0–30000).'),
    MISSED_CALL_ALERT_LOC_KEY: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,64}$/, '1 to 64 letters, digits, `_`, `.` or `-`')
      .default('MISSED_CALL')
      .describe("The `loc-key` of the iOS missed-call alert: the key of the app's Localizable.strings entry, e.g. `\"MISSED_CALL\" = \"Missed call from %@\";`, `%@` being the caller's name."),
    PUSH_APPS: optionalString.describe(
      'Several apps in one deployment (docs/push-apps.md): a JSON array of apps, each with its `appId` and its `ios` and/or `android` providers. Unset: the single-app `IOS_*`/`ANDROID_*` variables make the one default app, which takes any `appId`.',
    ),
    PUSH_APPS_FILE: optionalString.describe("A file holding PUSH_APPS's JSON (docs/push-apps.md); set at most one of the two."),

    WEBHOOKS: optionalString.describe('Webhook endpoints (docs/webhooks.md): a JSON array of `{ "id", "url", "secret", "events"? }`; `secret` is a Standard Webhooks `whsec_…` secret, or two of them while it rotates.'),
    WEBHOOKS_FILE: optionalString.describe("A file holding WEBHOOKS's JSON; set at most one of the two."),
    WEBHOOK_TIMEOUT_MS: int(10_000, 100, 120_000).describe('How long a webhook receiver may take to answer before the attempt counts as failed.'),
    WEBHOOK_CONCURRENCY: int(16, 1, 1000).describe('Webhook stream entries (first attempts) and retry jobs each run at once per queue partition and worker process (each sends its events in parallel).'),
    WEBHOOK_RETRY_SCHEDULE: z
      .string()
      .default('5s,5m,30m,2h,5h,10h,10h')
      .transform((v, ctx) => {
        const out: number[] = [];
        for (const part of v.split(',').map((p) => p.trim()).filter(Boolean)) {
          const m = /^(\d+)(ms|s|m|h)$/.exec(part);
          if (!m) {
            ctx.addIssue({ code: 'custom', message: `"${part}" is not a duration like 500ms, 5s, 5m or 2h` });
            return z.NEVER;
          }
          out.push(Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 'ms' | 's' | 'm' | 'h']);
        }
        return out;
      })
      .describe('The delays before each retry of a failed webhook delivery, comma-separated, each a whole number with its unit: `ms`, `s`, `m` or `h` (`500ms`, `5s`, `5m`, `2h`; a bare number is refused). N delays make N + 1 attempts: the default\'s 7 make 8, over about 27.6 h; after the last, the delivery becomes a dead letter. Empty: no retry (docs/webhooks.md "Retries").'),
    WEBHOOK_DEAD_LETTERS_MAX: int(10_000, 10, 1_000_000).describe('Dead letters kept for reading and replay; the oldest go first.'),

    NODE_ENV: z.string().optional().describe('`production`: no silent defaults; without `REDIS_URL`/`REDIS_CLUSTER_NODES` or an `AUTH_*` key the process exits 2 (no embedded Redis, `--dev` ignored).'),
    LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info').describe('Log level: `debug`, `info`, `warn`, `error` or `silent`.'),
    LOG_BUFFER_MAX_BYTES: int(DEFAULT_LOG_BUFFER_MAX_BYTES, 65_536, 1024 * 1024 * 1024).describe('Log lines waiting for a stdout reader that stopped reading (a stuck log shipper, a full pipe) are kept up to this many bytes; past it they are dropped and counted (`calling_log_lines_dropped_total`), and the server goes on serving. At exit the last lines get at most a second.'),
    ALLOW_UWS_FALLBACK: bool(false).describe('Run even if uWebSockets.js falls back to its slow `ws` shim (development only).'),
    EMBEDDED_REDIS_DIR: z.string().default('.data/redis').describe('Data directory of the embedded development Redis (used when `REDIS_URL` is unset).'),
    SHUTDOWN_TIMEOUT_MS: int(10_000, 100, 120_000).describe('Bound on graceful shutdown.'),
    SHUTDOWN_DRAIN_MS: int(0, 0, 60_000).describe('After SIGTERM, keep serving this long with `/readyz` already 503, so a load balancer moves traffic away before the listener closes (less than `SHUTDOWN_TIMEOUT_MS`).'),
    DEMO: bool(false).describe('Serve the browser softphone at `/demo/` (docs/development.md "Browser softphone").'),
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
    // An SFU is configured when all its settings are given (group calls then use it, whatever
    // MEDIA_MODE says): some of them alone is a mistake, not a choice of TURN only.
    const sfuSettings = (names: readonly (keyof typeof c)[], sfu: string) => {
      const given = names.filter((n) => (Array.isArray(c[n]) ? (c[n] as unknown[]).length > 0 : Boolean(c[n])));
      if (c.MEDIA_MODE !== 'sfu' && given.length === 0) return;
      const why = c.MEDIA_MODE === 'sfu' ? `with MEDIA_MODE=sfu and SFU=${sfu}` : `with SFU=${sfu} once any of ${names.join(', ')} is given`;
      for (const name of names) if (!given.includes(name)) ctx.addIssue({ code: 'custom', path: [name], message: `required ${why}` });
    };
    if (c.SFU === 'janus') sfuSettings(['JANUS_URLS', 'JANUS_API_SECRET', 'JANUS_TOKEN_SECRET', 'JANUS_ADMIN_KEY'], 'janus');
    if (c.JANUS_CLIENT_URLS.length > 0 && c.JANUS_CLIENT_URLS.length !== c.JANUS_URLS.length) {
      ctx.addIssue({ code: 'custom', path: ['JANUS_CLIENT_URLS'], message: 'needs one URL per JANUS_URLS entry, in the same order' });
    }
    if (c.SFU === 'livekit') sfuSettings(['LIVEKIT_URL', 'LIVEKIT_API_KEY', 'LIVEKIT_API_SECRET'], 'livekit');
    if (c.WS_CHECK_ORIGIN && !c.CORS_ORIGINS) {
      ctx.addIssue({ code: 'custom', path: ['WS_CHECK_ORIGIN'], message: 'needs CORS_ORIGINS (the list of allowed origins)' });
    }
    if (c.PUSH_APPS && c.PUSH_APPS_FILE) {
      ctx.addIssue({ code: 'custom', path: ['PUSH_APPS_FILE'], message: 'set only one of PUSH_APPS and PUSH_APPS_FILE' });
    }
    if (c.WEBHOOKS && c.WEBHOOKS_FILE) {
      ctx.addIssue({ code: 'custom', path: ['WEBHOOKS_FILE'], message: 'set only one of WEBHOOKS and WEBHOOKS_FILE' });
    }
    if (c.AUTH_JWT_SECRET !== undefined && Buffer.byteLength(c.AUTH_JWT_SECRET) < 32) {
      ctx.addIssue({ code: 'custom', path: ['AUTH_JWT_SECRET'], message: 'must be at least 32 bytes' });
    }
  });

export type Config = z.infer<typeof configSchema>;

/**
 * QUEUE_PARTITIONS when unset (docs/architecture.md "Queues"): 1 on a single Redis, where more partitions only
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
function authUnconfigured(c: Config): boolean {
  return !c.AUTH_JWT_SECRET && !c.AUTH_JWT_PUBLIC_KEY && !c.AUTH_JWKS_URL;
}

/**
 * What the process refuses to start with beyond the variables' own checks (src/main.ts stops with
 * exit code 2 and this line): no way to verify tokens (`--dev` makes a secret before this check,
 * never in production), or no Redis where none may be embedded (in production, or without a
 * `redis-server` to start). Undefined: it starts.
 */
export function startRefusal(c: Config, production: boolean, redisServerRuns: () => boolean): string | undefined {
  if (authUnconfigured(c)) return 'AUTH_JWT_SECRET: set one of AUTH_JWT_SECRET, AUTH_JWT_PUBLIC_KEY or AUTH_JWKS_URL (or run with --dev)';
  if (c.REDIS_URL || c.REDIS_CLUSTER_NODES) return undefined;
  if (production) return 'REDIS_URL: with NODE_ENV=production set REDIS_URL or REDIS_CLUSTER_NODES (the embedded Redis is for development only)';
  if (!redisServerRuns()) return 'REDIS_URL: neither REDIS_URL nor REDIS_CLUSTER_NODES is set, and no redis-server on the PATH to start an embedded one';
  return undefined;
}

export const configError = (lines: string[]) => new ConfigError(`invalid configuration:\n${lines.map((l) => `  ${l}`).join('\n')}`);

/**
 * Validates a JSON list of named entries from the configuration (PUSH_APPS's apps, WEBHOOKS's
 * endpoints): an error names the entry by its `key` field (`app "x" ios.keyId`), or by its place
 * when it has none, and the field; two entries with the same name are an error too.
 */
export function parseNamedList<S extends z.ZodType<readonly unknown[]>>(json: string, source: string, schema: S, label: string, key: string): z.output<S> {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw configError([`${source}: not JSON`]);
  }
  const nameOf = (entry: unknown): string | undefined => {
    const v = (entry as Record<string, unknown> | undefined)?.[key];
    return typeof v === 'string' && v ? v : undefined;
  };
  const result = schema.safeParse(raw);
  if (!result.success) {
    throw configError(
      result.error.issues.map((i) => {
        const [index, ...rest] = i.path;
        if (typeof index !== 'number') return `${source}: (the list): ${i.message}`;
        const name = nameOf(Array.isArray(raw) ? raw[index] : undefined);
        const where = name ? `${label} "${name}"` : `${label} #${index + 1}`;
        return `${source}: ${rest.length ? `${where} ${rest.map(String).join('.')}` : where}: ${i.message}`;
      }),
    );
  }
  const seen = new Set<string>();
  for (const entry of result.data) {
    const name = nameOf(entry)!;
    if (seen.has(name)) throw configError([`${source}: ${label} "${name}" ${key}: listed twice`]);
    seen.add(name);
  }
  return result.data;
}
