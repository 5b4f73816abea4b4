import { generateKeyPairSync, randomBytes, randomInt, type KeyObject } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer as createHttp1Server, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import { createServer as createHttp2Server, type ServerHttp2Session } from 'node:http2';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { decodeJwt, decodeProtectedHeader, errors as joseErrors, jwtVerify, type JWTPayload, type ProtectedHeaderParameters } from 'jose';
import { bearerToken, decodeUnverified, FakeProvider, isObject, parseJson, parseJsonOrText, plainHeaders, readBody, type Body, type DecodedJwt, type RecordedRequest } from './fakeHttp.js';

/**
 * A fake Firebase Cloud Messaging HTTP v1 API with its OAuth 2.0 token endpoint, on one
 * cleartext port that speaks HTTP/1.1 and HTTP/2 (h2c).
 *
 * It checks what FCM and Google's token endpoint check, plus our product's rules (docs/protocol.md
 * "Android invitation", "Android push signals"): no notification block, an explicit priority and a non-zero ttl, and a
 * `data.callpayload` string holding a JSON object. Errors have Google's shape.
 */

export const FCM_SCOPE = 'https://www.googleapis.com/auth/firebase.messaging';
/**
 * Google's token endpoint, the `token_uri` of every real key file. Google takes it as an
 * assertion's audience wherever the assertion is posted, and Google's own client library always
 * uses it, so the fake does too (beside its own URL).
 */
export const GOOGLE_TOKEN_URL = 'https://oauth2.googleapis.com/token';
const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

export interface ServiceAccountJson {
  type: 'service_account';
  project_id: string;
  private_key_id: string;
  /** PKCS#8 PEM, as Google's downloaded key files hold it. */
  private_key: string;
  client_email: string;
  client_id: string;
  token_uri: string;
}

export interface ServiceAccount {
  json: ServiceAccountJson;
  publicKey: KeyObject;
}

export interface FakeFcmOptions {
  /** Project of the service account the fake creates. Default: a random `fake-project-…`. */
  projectId?: string;
  /** `expires_in` of issued access tokens. Default 3600. */
  accessTokenTtlSeconds?: number;
  /** The data key that must hold the payload (PUSH_PAYLOAD_KEY). Default `callpayload`. */
  payloadKey?: string;
}

export type FcmErrorCode =
  | 'UNREGISTERED'
  | 'INVALID_ARGUMENT'
  | 'QUOTA_EXCEEDED'
  | 'UNAVAILABLE'
  | 'INTERNAL'
  | 'SENDER_ID_MISMATCH'
  | 'THIRD_PARTY_AUTH_ERROR';

export interface FcmScriptedResponse {
  status: number;
  /** Default: the usual code for `status` (404 → UNREGISTERED, 429 → QUOTA_EXCEEDED, …). */
  errorCode?: FcmErrorCode;
  message?: string;
  /** Fields named in a `google.rpc.BadRequest` detail, as FCM names a bad `message.token`. */
  fieldViolations?: string[];
  /** Sent as the `retry-after` header. */
  retryAfterSeconds?: number;
  /** Holds the answer back this long (the message is recorded at once). Default: 0. */
  delayMs?: number;
}

/** 'unregistered' → 404 UNREGISTERED, 'invalid' → 400 INVALID_ARGUMENT, 'valid' → accepted again. */
export type FcmTokenState = 'unregistered' | 'invalid' | 'valid';

export type FcmDecodedJwt = DecodedJwt;

export interface FcmRecordedMessage extends RecordedRequest {
  httpVersion: string;
  /** The bearer access token presented, null when none. */
  accessToken: string | null;
  /** `message.token` when present. */
  token: string | null;
  response: unknown;
}

export interface FcmRecordedTokenRequest {
  httpVersion: string;
  headers: Record<string, string>;
  form: Record<string, string>;
  /** The assertion decoded without verification; null when absent or undecodable. */
  assertion: FcmDecodedJwt | null;
  status: number;
  response: unknown;
}

interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  delayMs?: number;
}

interface TrustedAccount {
  projectId: string;
  publicKey: KeyObject;
  keyId: string;
}

interface IssuedToken {
  clientEmail: string;
  expiresAtMs: number;
}

/** The request and response surface shared by node:http and the node:http2 compatibility API. */
interface AnyRequest extends AsyncIterable<Buffer> {
  method?: string | undefined;
  url?: string | undefined;
  httpVersion: string;
  headers: IncomingHttpHeaders;
}
interface AnyResponse {
  writeHead(status: number, headers: OutgoingHttpHeaders): unknown;
  end(body: string): unknown;
  headersSent: boolean;
}

const MAX_BODY_BYTES = 64 * 1024;
/** FCM's limit on the data of one message (keys and values). */
const MAX_DATA_BYTES = 4096;
/** FCM's longest ttl: 4 weeks. */
const MAX_TTL_S = 28 * 24 * 60 * 60;
/** Google's limit on an assertion's lifetime. */
const MAX_ASSERTION_LIFETIME_S = 3600;
const CLOCK_SKEW_S = 60;
const TTL_SYNTAX = /^\d+(\.\d{1,9})?s$/;
const SEND_PATH = /^\/v1\/projects\/([^/]+)\/messages:send$/;
const HTTP2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
const UNAUTHENTICATED_MESSAGE =
  'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.';

const STATUS_NAMES: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
};
const DEFAULT_ERROR_CODES: Record<number, FcmErrorCode> = {
  400: 'INVALID_ARGUMENT',
  403: 'SENDER_ID_MISMATCH',
  404: 'UNREGISTERED',
  429: 'QUOTA_EXCEEDED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
};
const DEFAULT_MESSAGES: Record<number, string> = {
  401: UNAUTHENTICATED_MESSAGE,
  404: 'Requested entity was not found.',
  429: 'Quota exceeded for quota metric.',
  500: 'Internal error encountered.',
  503: 'The service is currently unavailable.',
};

/** A service account like Google's downloaded JSON key file, with an RSA 2048 key. */
export function makeServiceAccount(tokenUrl: string, projectId = `fake-project-${randomBytes(3).toString('hex')}`): ServiceAccount {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    json: {
      type: 'service_account',
      project_id: projectId,
      private_key_id: randomBytes(20).toString('hex'),
      private_key: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
      client_email: `firebase-adminsdk@${projectId}.iam.gserviceaccount.com`,
      client_id: String(randomInt(1e9, 2 ** 47)),
      token_uri: tokenUrl,
    },
    publicKey,
  };
}

/** Writes `service-account.json` into `dir` (owner-only, it holds a private key); returns its path. */
export function writeServiceAccountFile(dir: string, json: ServiceAccountJson): string {
  const path = join(dir, 'service-account.json');
  writeFileSync(path, JSON.stringify(json, null, 2), { mode: 0o600 });
  return path;
}

/** Starts the fake and a service account it trusts (`fake.serviceAccount`, token_uri = `fake.tokenUrl`). */
export async function startFakeFcm(opts: FakeFcmOptions = {}): Promise<FakeFcm> {
  const fake = new FakeFcm(opts);
  await fake.listen();
  return fake;
}

/** The fake FCM (its `url` is the FCM API base). */
export class FakeFcm extends FakeProvider<FcmScriptedResponse, FcmTokenState> {
  /** Requests to anything but the token endpoint, in arrival order, whatever their outcome. */
  readonly messages: FcmRecordedMessage[] = [];
  readonly tokenRequests: FcmRecordedTokenRequest[] = [];
  /** `<url>/token`: the OAuth token endpoint (the assertion's `aud`). */
  tokenUrl = '';
  /** Connections opened so far, by protocol. */
  readonly connections = { http1: 0, http2: 0 };

  private readonly net: NetServer;
  private readonly sockets = new Set<Socket>();
  private readonly accounts = new Map<string, TrustedAccount>();
  private readonly accessTokens = new Map<string, IssuedToken>();
  private readonly accessTokenTtlSeconds: number;
  private ownAccount: ServiceAccount | undefined;

  constructor(private readonly opts: FakeFcmOptions = {}) {
    super();
    this.accessTokenTtlSeconds = opts.accessTokenTtlSeconds ?? 3600;
    const handler = (req: AnyRequest, res: AnyResponse): void => {
      this.handle(req, res).catch((err: unknown) => {
        // A bug in the fake must fail the test loudly, not hang it.
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify(googleError(500, `fake FCM failed: ${String(err)}`)));
      });
    };
    const http1 = createHttp1Server(handler);
    const http2 = createHttp2Server(handler);
    http2.on('session', (session: ServerHttp2Session) => {
      this.connections.http2++;
      session.on('error', () => {});
    });
    this.net = createNetServer((socket) => this.route(socket, http1, http2));
  }

  /** The account made when the fake started listening (its token_uri is `tokenUrl`). */
  get serviceAccount(): ServiceAccount {
    if (!this.ownAccount) throw new Error('FakeFcm: the service account exists once listen() resolved');
    return this.ownAccount;
  }

  /** The project of the fake's own service account: where messages are sent. */
  get projectId(): string {
    return this.serviceAccount.json.project_id;
  }

  /** Accepts assertions signed by `account` (e.g. one made with `makeServiceAccount`). */
  trustServiceAccount(account: ServiceAccount): void {
    this.accounts.set(account.json.client_email, {
      projectId: account.json.project_id,
      publicKey: account.publicKey,
      keyId: account.json.private_key_id,
    });
  }

  /** Every access token issued so far stops working (401), as after its expiry. */
  expireAllAccessTokens(): void {
    for (const issued of this.accessTokens.values()) issued.expiresAtMs = 0;
  }

  /** Resolves with the recorded messages once at least `n` arrived. */
  waitForMessages(n: number, timeoutMs = 5_000): Promise<FcmRecordedMessage[]> {
    return this.log.waitFor(this.messages, n, timeoutMs, 'FCM messages');
  }

  async listen(): Promise<void> {
    await this.listenOn(this.net);
    this.tokenUrl = `${this.url}/token`;
    // The assertion's audience is the token URL, so the account can only be made now.
    this.ownAccount = makeServiceAccount(this.tokenUrl, this.opts.projectId);
    this.trustServiceAccount(this.ownAccount);
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.net.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  /**
   * Hands each connection to the HTTP/2 or the HTTP/1.1 server by its first bytes. Node's
   * `allowHTTP1` works only with TLS (ALPN), so cleartext needs this: HTTP/2 clients open with
   * a fixed preface ("PRI * HTTP/2.0…"), HTTP/1.1 ones with a method name.
   */
  private route(socket: Socket, http1: NetServer, http2: NetServer): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => {});
    socket.once('data', (first: Buffer) => {
      socket.pause();
      socket.unshift(first);
      const n = Math.min(first.length, HTTP2_PREFACE.length);
      const isHttp2 = first.subarray(0, n).equals(HTTP2_PREFACE.subarray(0, n));
      if (isHttp2) {
        // The HTTP/2 session reads the unshifted bytes itself; resuming would race it.
        http2.emit('connection', socket);
      } else {
        this.connections.http1++;
        http1.emit('connection', socket);
        socket.resume();
      }
    });
  }

  private async handle(req: AnyRequest, res: AnyResponse): Promise<void> {
    const receivedAtMs = Date.now();
    const raw = await readBody(req, MAX_BODY_BYTES);
    const path = req.url ?? '';
    if (path === '/token') this.recordToken(req, raw, await this.issueToken(req, raw), res);
    else await this.recordMessage(req, raw, this.sendMessage(req, path, raw), res, receivedAtMs);
  }

  private recordToken(req: AnyRequest, raw: Body, reply: Reply, res: AnyResponse): void {
    const form = Object.fromEntries(new URLSearchParams(raw.text));
    this.log.record(this.tokenRequests, {
      httpVersion: req.httpVersion,
      headers: plainHeaders(req.headers),
      form,
      assertion: form['assertion'] ? decodeUnverified(form['assertion']) : null,
      status: reply.status,
      response: reply.body,
    });
    send(res, reply);
  }

  private async recordMessage(req: AnyRequest, raw: Body, reply: Reply, res: AnyResponse, receivedAtMs: number): Promise<void> {
    const body = parseJsonOrText(raw.text);
    const message = isObject(body) && isObject(body['message']) ? body['message'] : {};
    this.log.record(this.messages, {
      method: req.method ?? '',
      path: req.url ?? '',
      httpVersion: req.httpVersion,
      headers: plainHeaders(req.headers),
      body,
      accessToken: bearerToken(req.headers.authorization),
      token: typeof message['token'] === 'string' ? message['token'] : null,
      status: reply.status,
      response: reply.body,
      receivedAtMs,
    });
    if (reply.delayMs) await new Promise((resolve) => setTimeout(resolve, reply.delayMs));
    send(res, reply);
  }

  // ---- OAuth 2.0 token endpoint (RFC 7523 JWT bearer grant, as Google runs it) ----

  private async issueToken(req: AnyRequest, raw: Body): Promise<Reply> {
    if (req.method !== 'POST') return oauthError(405, 'invalid_request', 'POST required');
    if (!/^application\/x-www-form-urlencoded\s*(;.*)?$/i.test(req.headers['content-type'] ?? '')) {
      return oauthError(400, 'invalid_request', 'content-type must be application/x-www-form-urlencoded');
    }
    const form = new URLSearchParams(raw.text);
    if (form.get('grant_type') !== JWT_BEARER_GRANT) {
      return oauthError(400, 'unsupported_grant_type', `Invalid grant_type: ${form.get('grant_type') ?? ''}`);
    }
    const assertion = form.get('assertion');
    if (!assertion) return oauthError(400, 'invalid_request', 'Missing required parameter: assertion');
    const problem = await this.checkAssertion(assertion);
    if (problem) return problem;
    const accessToken = `ya29.fake-${randomBytes(32).toString('base64url')}`;
    const clientEmail = String(decodeJwt(assertion).iss);
    this.accessTokens.set(accessToken, { clientEmail, expiresAtMs: Date.now() + this.accessTokenTtlSeconds * 1000 });
    return { status: 200, body: { access_token: accessToken, token_type: 'Bearer', expires_in: this.accessTokenTtlSeconds } };
  }

  /** Null when the assertion is good, else Google's answer. */
  private async checkAssertion(assertion: string): Promise<Reply | null> {
    let header: ProtectedHeaderParameters;
    let claims: JWTPayload;
    try {
      header = decodeProtectedHeader(assertion);
      claims = decodeJwt(assertion);
    } catch {
      return oauthError(400, 'invalid_grant', 'Invalid JWT: not a JWT');
    }
    const account = typeof claims.iss === 'string' ? this.accounts.get(claims.iss) : undefined;
    if (!account) return oauthError(400, 'invalid_grant', 'Invalid JWT: unknown issuer (client_email)');
    if (header.alg !== 'RS256') return oauthError(400, 'invalid_grant', 'Invalid JWT: alg must be RS256');
    if (header.kid !== undefined && header.kid !== account.keyId) {
      return oauthError(400, 'invalid_grant', 'Invalid JWT: kid does not match private_key_id');
    }
    try {
      await jwtVerify(assertion, account.publicKey, { algorithms: ['RS256'], issuer: claims.iss, audience: [this.tokenUrl, GOOGLE_TOKEN_URL] });
    } catch (err) {
      const why = err instanceof joseErrors.JWTExpired ? 'Token has expired' : err instanceof Error ? err.message : 'bad JWT';
      return oauthError(400, 'invalid_grant', `Invalid JWT: ${why}`);
    }
    return checkAssertionTimes(claims) ?? checkScope(claims);
  }

  // ---- FCM HTTP v1 messages:send ----

  private sendMessage(req: AnyRequest, path: string, raw: Body): Reply {
    const project = SEND_PATH.exec(path)?.[1];
    if (req.method !== 'POST' || project === undefined) return googleReply(404, 'Not found: no such FCM method.');
    const accessToken = bearerToken(req.headers.authorization);
    const issued = accessToken === null ? undefined : this.accessTokens.get(accessToken);
    if (!issued || issued.expiresAtMs <= Date.now()) return googleReply(401, UNAUTHENTICATED_MESSAGE);
    if (this.accounts.get(issued.clientEmail)?.projectId !== project) {
      return googleReply(403, `Permission 'cloudmessaging.messages.create' denied on project ${project}`, 'SENDER_ID_MISMATCH');
    }
    if (!/^application\/json\s*(;.*)?$/i.test(req.headers['content-type'] ?? '')) {
      return invalidArgument('content-type must be application/json');
    }
    if (raw.tooLarge) return invalidArgument('Request payload size exceeds the limit');
    const body = parseJson(raw.text);
    if (body === undefined) return invalidArgument('Invalid JSON payload received.');
    const problem = validateSendBody(body, this.opts.payloadKey);
    if (problem !== null) return invalidArgument(problem);
    // validateSendBody checked these shapes.
    const request = body as { message: { token: string }; validate_only?: boolean; validateOnly?: boolean };
    const token = request.message.token;
    // validate_only: FCM checks the message and answers with a fixed fake id, sending nothing.
    if (request.validate_only === true || request.validateOnly === true) {
      return { status: 200, body: { name: `projects/${project}/messages/fake_message_id` } };
    }
    return this.tokenReply(token) ?? {
      status: 200,
      body: { name: `projects/${project}/messages/0:${Date.now()}%${randomBytes(8).toString('hex')}` },
    };
  }

  private tokenReply(token: string): Reply | null {
    const next = this.script.next(token);
    if (next === undefined) return null;
    if ('scripted' in next) return scriptedToReply(next.scripted);
    if (next.state === 'unregistered') return googleReply(404, 'Requested entity was not found.', 'UNREGISTERED');
    if (next.state === 'invalid') {
      return googleReply(400, 'The registration token is not a valid FCM registration token', 'INVALID_ARGUMENT', ['message.token']);
    }
    return null;
  }
}

function checkAssertionTimes(claims: JWTPayload): Reply | null {
  const now = Math.floor(Date.now() / 1000);
  const { iat, exp } = claims;
  const reasonable =
    typeof iat === 'number' && typeof exp === 'number' && exp > iat && exp - iat <= MAX_ASSERTION_LIFETIME_S && iat <= now + CLOCK_SKEW_S;
  if (reasonable) return null;
  return oauthError(
    400,
    'invalid_grant',
    'Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.',
  );
}

function checkScope(claims: JWTPayload): Reply | null {
  const scopes = typeof claims['scope'] === 'string' ? claims['scope'].split(' ') : [];
  return scopes.includes(FCM_SCOPE) ? null : oauthError(400, 'invalid_scope', 'Invalid OAuth scope or ID token audience provided.');
}

// ---- message validation: FCM's own rules plus our product's ----

/** FCM's field names (proto JSON accepts both spellings); anything else is "Unknown name". */
const BODY_FIELDS = new Set(['message', 'validate_only', 'validateOnly']);
const MESSAGE_FIELDS = new Set(['name', 'data', 'notification', 'android', 'webpush', 'apns', 'fcm_options', 'fcmOptions', 'token', 'topic', 'condition']);
const ANDROID_FIELDS = new Set([
  'collapse_key', 'collapseKey', 'priority', 'ttl', 'restricted_package_name', 'restrictedPackageName',
  'data', 'notification', 'fcm_options', 'fcmOptions', 'direct_boot_ok', 'directBootOk',
]);
const RESERVED_DATA_KEYS = new Set(['from', 'notification', 'message_type']);

/** Null when the body is a message our product may send, else the error message. */
export function validateSendBody(body: unknown, payloadKey = 'callpayload'): string | null {
  if (!isObject(body)) return 'Invalid JSON payload received. Expected an object.';
  const message = body['message'];
  return (
    unknownField(body, BODY_FIELDS, '') ??
    (isObject(message) ? validateMessage(message, payloadKey) : "Invalid value at 'message': an object is required")
  );
}

function validateMessage(message: Record<string, unknown>, payloadKey: string): string | null {
  const android = message['android'];
  return (
    unknownField(message, MESSAGE_FIELDS, 'message') ??
    (message['notification'] !== undefined
      ? 'message.notification is not allowed: this product sends data messages only (the app presents the call)'
      : null) ??
    (message['topic'] !== undefined || message['condition'] !== undefined
      ? 'message must target a device token (topic and condition are not used)'
      : null) ??
    (typeof message['token'] === 'string' && message['token'] !== '' ? null : 'message.token must be a non-empty string') ??
    (isObject(android) ? validateAndroid(android) : 'message.android is required (priority and ttl)') ??
    validateData(message['data'], payloadKey)
  );
}

function validateAndroid(android: Record<string, unknown>): string | null {
  const unknown = unknownField(android, ANDROID_FIELDS, 'message.android');
  if (unknown) return unknown;
  if (android['notification'] !== undefined) {
    return 'message.android.notification is not allowed: this product sends data messages only';
  }
  if (android['priority'] !== 'HIGH' && android['priority'] !== 'NORMAL') {
    return 'message.android.priority must be "HIGH" or "NORMAL"';
  }
  const ttl = android['ttl'];
  if (typeof ttl !== 'string' || !TTL_SYNTAX.test(ttl)) {
    return "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration): a duration such as \"30s\" is required";
  }
  const seconds = Number(ttl.slice(0, -1));
  if (seconds === 0) return 'message.android.ttl must not be 0s: a zero-ttl message is dropped when the device is offline';
  if (seconds > MAX_TTL_S) return 'message.android.ttl must be at most 4 weeks (2419200s)';
  return null;
}

function validateData(data: unknown, payloadKey: string): string | null {
  if (!isObject(data)) return `message.data is required (${payloadKey})`;
  let bytes = 0;
  for (const [key, value] of Object.entries(data)) {
    if (typeof value !== 'string') return `Invalid value at 'message.data[${key}].value' (TYPE_STRING): data values must be strings`;
    if (RESERVED_DATA_KEYS.has(key) || key.startsWith('google') || key.startsWith('gcm')) return `Invalid data payload key: ${key}`;
    bytes += Buffer.byteLength(key) + Buffer.byteLength(value);
  }
  if (bytes > MAX_DATA_BYTES) return 'Android message is too big';
  const payload = data[payloadKey];
  if (typeof payload !== 'string') return `message.data.${payloadKey} is required`;
  if (!isObject(parseJson(payload))) return `message.data.${payloadKey} must be a string holding a JSON object`;
  return null;
}

function unknownField(obj: Record<string, unknown>, known: Set<string>, where: string): string | null {
  const name = Object.keys(obj).find((k) => !known.has(k));
  if (name === undefined) return null;
  return `Invalid JSON payload received. Unknown name "${name}"${where ? ` at '${where}'` : ''}: Cannot find field.`;
}

// ---- replies ----

/**
 * Google's error shape for FCM v1: `error.code`, `error.message`, `error.status`, and
 * `error.details[]` with the `FcmError` detail (its `errorCode`) and, for a bad field, a
 * `google.rpc.BadRequest` detail naming it.
 */
function googleError(status: number, message: string, errorCode?: FcmErrorCode, fieldViolations: string[] = []): unknown {
  const error: Record<string, unknown> = { code: status, message, status: STATUS_NAMES[status] ?? 'UNKNOWN' };
  const details: unknown[] = [];
  if (errorCode) details.push({ '@type': 'type.googleapis.com/google.firebase.fcm.v1.FcmError', errorCode });
  if (fieldViolations.length > 0) {
    details.push({ '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: fieldViolations.map((field) => ({ field, description: `Invalid value at '${field}'` })) });
  }
  if (details.length > 0) error['details'] = details;
  return { error };
}

function googleReply(status: number, message: string, errorCode?: FcmErrorCode, fieldViolations?: string[]): Reply {
  return { status, body: googleError(status, message, errorCode, fieldViolations) };
}

function invalidArgument(message: string): Reply {
  return googleReply(400, message, 'INVALID_ARGUMENT');
}

function scriptedToReply(scripted: FcmScriptedResponse): Reply {
  const { status } = scripted;
  const message = scripted.message ?? DEFAULT_MESSAGES[status] ?? 'Scripted failure.';
  const reply = googleReply(status, message, scripted.errorCode ?? DEFAULT_ERROR_CODES[status], scripted.fieldViolations);
  if (scripted.retryAfterSeconds !== undefined) reply.headers = { 'retry-after': String(scripted.retryAfterSeconds) };
  if (scripted.delayMs) reply.delayMs = scripted.delayMs;
  return reply;
}

function oauthError(status: number, error: string, description: string): Reply {
  return { status, body: { error, error_description: description } };
}

function send(res: AnyResponse, reply: Reply): void {
  res.writeHead(reply.status, { ...reply.headers, 'content-type': 'application/json; charset=UTF-8' });
  res.end(JSON.stringify(reply.body));
}
