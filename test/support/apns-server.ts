import { generateKeyPairSync, randomInt, randomUUID, type KeyObject } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import {
  createServer,
  type Http2Server,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type ServerHttp2Session,
} from 'node:http2';
import { decodeProtectedHeader, errors as joseErrors, jwtVerify, type JWTPayload, type ProtectedHeaderParameters } from 'jose';
import { bearerToken, decodeUnverified, FakeProvider, isObject, parseJson, parseJsonOrText, plainHeaders, readBody, type Body, type DecodedJwt, type RecordedRequest } from './fakeHttp.js';

/**
 * A fake Apple Push Notification service over cleartext HTTP/2 (h2c).
 *
 * It checks what APNs documents for a token-authenticated push, with Apple's header names
 * (docs/protocol.md "Names sent to Apple and Google"), and answers with APNs's statuses, reasons
 * and bodies: a request without `apns-topic` gets 400 `MissingTopic`, one without a known
 * `apns-push-type` 400 `InvalidPushType`, and headers APNs does not read are ignored, as APNs
 * ignores them. `failNext` plays any other documented answer (a `Shutdown` answer is followed by
 * GOAWAY, as APNs closes the connection). One check is our product's, not Apple's: the body is
 * `{"aps":{}, <payload key>: {...}}` for a VoIP push (docs/protocol.md "iOS VoIP invitation") and
 * `{"aps":{"alert":{"loc-key":…}, …}, <payload key>: {...}}` for an alert (docs/protocol.md
 * "Missed-call alerts"), else 400 `BadPayload`. Its fidelity is proven against `@parse/node-apn` (test/integration/provider-fakes.test.ts).
 */

export interface ApnsKey {
  /** The signing key as an Apple .p8 file holds it: PKCS#8 PEM. */
  privateKeyPem: string;
  publicKey: KeyObject;
  keyId: string;
  teamId: string;
}

export interface FakeApnsOptions {
  /** The app's bundle id; the fake expects topic `<bundleId>.voip`. */
  bundleId: string;
  keyId: string;
  teamId: string;
  publicKey: KeyObject;
  /** Largest accepted body. Default 5120 bytes, the APNs limit for VoIP pushes. */
  maxPayloadBytes?: number;
  /** The body key that must hold the invitation (PUSH_PAYLOAD_KEY). Default `callpayload`. */
  payloadKey?: string;
}

/** 'unregistered' → 410 Unregistered, 'bad' → 400 BadDeviceToken, 'valid' → accepted again. */
export type ApnsTokenState = 'unregistered' | 'bad' | 'valid';

export interface ApnsScriptedResponse {
  status: number;
  /** Default: the usual reason for `status` (e.g. 429 → TooManyRequests). */
  reason?: string;
  /** Sent as the `retry-after` header. */
  retryAfterSeconds?: number;
  /** For 410 answers: when the token stopped being valid. Default: now. */
  timestampMs?: number;
  /** Holds the answer back this long (the request is recorded at once). Default: 0. */
  delayMs?: number;
}

export type ApnsDecodedJwt = DecodedJwt;

export interface ApnsRecordedRequest extends RecordedRequest {
  /** The device token from the path ('' when the path has none). */
  token: string;
  /** The provider token, decoded without verification; null when absent or undecodable. */
  jwt: ApnsDecodedJwt | null;
  reason?: string;
  apnsId: string;
}

interface Reply {
  status: number;
  reason?: string;
  retryAfterSeconds?: number;
  timestampMs?: number;
  delayMs?: number;
}

const DEFAULT_MAX_PAYLOAD_BYTES = 5120;
const ALERT_MAX_PAYLOAD_BYTES = 4096;
/** APNs refuses provider tokens older than an hour. */
const PROVIDER_TOKEN_MAX_AGE_S = 60 * 60;
/** Tolerated clock skew for an `iat` in the future. */
const CLOCK_SKEW_S = 60;
const HEX_TOKEN = /^[0-9a-fA-F]+$/;
const TOPIC_SYNTAX = /^[A-Za-z0-9.-]+$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** The `apns-push-type` values Apple documents. */
const PUSH_TYPES = new Set(['alert', 'background', 'location', 'voip', 'complication', 'fileprovider', 'mdm', 'liveactivity', 'pushtotalk']);
const PRIORITIES = new Set(['1', '5', '10']);
const MAX_COLLAPSE_ID_BYTES = 64;

const DEFAULT_REASONS: Record<number, string> = {
  400: 'BadDeviceToken',
  403: 'Forbidden',
  404: 'BadPath',
  405: 'MethodNotAllowed',
  410: 'Unregistered',
  413: 'PayloadTooLarge',
  429: 'TooManyRequests',
  500: 'InternalServerError',
  503: 'ServiceUnavailable',
};

/** An ES256 (P-256) signing key with Apple-style 10-character key and team ids. */
export function makeApnsKey(): ApnsKey {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return {
    privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    publicKey,
    keyId: appleId(),
    teamId: appleId(),
  };
}

function appleId(): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
  return Array.from({ length: 10 }, () => alphabet[randomInt(alphabet.length)]).join('');
}

export async function startFakeApns(opts: FakeApnsOptions): Promise<FakeApns> {
  const fake = new FakeApns(opts);
  await fake.listen();
  return fake;
}

export class FakeApns extends FakeProvider<ApnsScriptedResponse, ApnsTokenState> {
  /** Every request received, in arrival order, whatever its outcome. */
  readonly requests: ApnsRecordedRequest[] = [];
  /** HTTP/2 connections opened so far (a good sender reuses one). */
  sessionsOpened = 0;

  private readonly server: Http2Server;
  private readonly sessions = new Set<ServerHttp2Session>();
  private readonly jwtsSeen = new Set<string>();
  /**
   * Provider tokens whose signature checked out, with their claims: a provider reuses one token
   * for up to an hour, and an ES256 verification costs ~0.2 ms of CPU, which the bench's fakes
   * would otherwise take from the server on the same cores. The age checks still run each time.
   */
  private readonly verifiedTokens = new Map<string, JWTPayload>();
  private readonly maxPayloadBytes: number;

  constructor(private readonly opts: FakeApnsOptions) {
    // APNs tokens are hex, compared case-insensitively.
    super((t) => t.toLowerCase());
    this.maxPayloadBytes = opts.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        // A bug in the fake must fail the test loudly, not hang it.
        if (!res.headersSent) res.writeHead(500);
        res.end(JSON.stringify({ reason: 'InternalServerError', fakeError: String(err) }));
      });
    });
    this.server.on('session', (session) => {
      this.sessionsOpened++;
      this.sessions.add(session);
      session.on('close', () => this.sessions.delete(session));
    });
  }

  /** How many different provider tokens were presented (APNs wants one reused for up to an hour). */
  get distinctJwts(): number {
    return this.jwtsSeen.size;
  }

  /** Resolves with the requests once at least `n` arrived. */
  waitForRequests(n: number, timeoutMs = 5_000): Promise<ApnsRecordedRequest[]> {
    return this.log.waitFor(this.requests, n, timeoutMs, 'APNs requests');
  }

  /** Drops every HTTP/2 connection at once, as a network failure would. */
  disconnectAll(): void {
    for (const session of this.sessions) session.destroy();
  }

  listen(): Promise<void> {
    return this.listenOn(this.server);
  }

  /** Closes connections politely (GOAWAY), forcibly after a second, then stops listening. */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const session of this.sessions) session.close();
    const force = setTimeout(() => this.disconnectAll(), 1_000);
    await closed;
    clearTimeout(force);
  }

  private async handle(req: Http2ServerRequest, res: Http2ServerResponse): Promise<void> {
    const receivedAtMs = Date.now();
    const body = await readBody(req, this.maxPayloadBytes);
    const path = req.url;
    const token = /^\/3\/device\/([^/?]*)$/.exec(path)?.[1] ?? '';
    const jwt = bearerToken(req.headers.authorization);
    if (jwt) this.jwtsSeen.add(jwt);
    const reply = await this.judge(req, token, jwt, body);
    const apnsId = randomUUID();
    const record: ApnsRecordedRequest = {
      method: req.method,
      path,
      token,
      headers: plainHeaders(req.headers),
      body: parseJsonOrText(body.text),
      jwt: jwt ? decodeUnverified(jwt) : null,
      status: reply.status,
      apnsId,
      receivedAtMs,
    };
    if (reply.reason !== undefined) record.reason = reply.reason;
    this.log.record(this.requests, record);
    if (reply.delayMs) await new Promise((resolve) => setTimeout(resolve, reply.delayMs));
    send(res, reply, apnsId);
    // APNs closes a connection it answered `Shutdown` on.
    if (reply.reason === 'Shutdown') res.stream.session?.close();
  }

  /** The answer APNs would give, checks in roughly the order APNs makes them. */
  private async judge(req: Http2ServerRequest, token: string, jwt: string | null, body: Body): Promise<Reply> {
    return (
      checkRoute(req, token) ??
      (await this.checkProviderToken(req.headers.authorization, jwt)) ??
      this.checkHeaders(req.headers) ??
      this.checkBody(body, single(req.headers['apns-push-type'])) ??
      this.tokenReply(token) ?? { status: 200 }
    );
  }

  private async checkProviderToken(authorization: string | undefined, jwt: string | null): Promise<Reply | null> {
    if (authorization === undefined) return reject(403, 'MissingProviderToken');
    if (jwt === null) return reject(403, 'InvalidProviderToken');
    let header: ProtectedHeaderParameters;
    try {
      header = decodeProtectedHeader(jwt);
    } catch {
      return reject(403, 'InvalidProviderToken');
    }
    if (header.alg !== 'ES256' || header.kid !== this.opts.keyId) return reject(403, 'InvalidProviderToken');
    let payload = this.verifiedTokens.get(jwt);
    if (payload === undefined) {
      try {
        ({ payload } = await jwtVerify(jwt, this.opts.publicKey, { algorithms: ['ES256'], issuer: this.opts.teamId }));
      } catch (err) {
        return reject(403, err instanceof joseErrors.JWTExpired ? 'ExpiredProviderToken' : 'InvalidProviderToken');
      }
      // Claims jose checks against the clock each time are never cached.
      if (payload.exp === undefined && payload.nbf === undefined) {
        if (this.verifiedTokens.size >= 64) this.verifiedTokens.clear();
        this.verifiedTokens.set(jwt, payload);
      }
    }
    const now = Math.floor(Date.now() / 1000);
    if (typeof payload.iat !== 'number' || payload.iat > now + CLOCK_SKEW_S) return reject(403, 'InvalidProviderToken');
    if (now - payload.iat > PROVIDER_TOKEN_MAX_AGE_S) return reject(403, 'ExpiredProviderToken');
    return null;
  }

  /** The request headers APNs reads, checked as Apple documents them; any other header is ignored. */
  private checkHeaders(headers: IncomingHttpHeaders): Reply | null {
    const topic = single(headers['apns-topic']);
    // Token authentication names no app, so APNs needs the topic.
    if (topic === undefined || topic === '') return reject(400, 'MissingTopic');
    if (!TOPIC_SYNTAX.test(topic)) return reject(400, 'BadTopic');
    const pushType = single(headers['apns-push-type']);
    if (pushType === undefined || !PUSH_TYPES.has(pushType)) return reject(400, 'InvalidPushType');
    // VoIP pushes go to the app's `.voip` topic; the fake's tokens belong to its one app.
    if (topic !== (pushType === 'voip' ? `${this.opts.bundleId}.voip` : this.opts.bundleId)) return reject(400, 'DeviceTokenNotForTopic');
    const priority = single(headers['apns-priority']);
    if (priority !== undefined && !PRIORITIES.has(priority)) return reject(400, 'BadPriority');
    const expiration = single(headers['apns-expiration']);
    if (expiration !== undefined && !/^\d{1,10}$/.test(expiration)) return reject(400, 'BadExpirationDate');
    const id = single(headers['apns-id']);
    if (id !== undefined && !UUID.test(id)) return reject(400, 'BadMessageId');
    const collapseId = single(headers['apns-collapse-id']);
    if (collapseId !== undefined && Buffer.byteLength(collapseId) > MAX_COLLAPSE_ID_BYTES) return reject(400, 'BadCollapseId');
    return null;
  }

  private checkBody(body: Body, pushType: string | undefined): Reply | null {
    if (body.tooLarge) return reject(413, 'PayloadTooLarge');
    // Apple's limit is 5 KB for VoIP pushes, 4 KB for every other kind.
    if (pushType !== 'voip' && Buffer.byteLength(body.text) > ALERT_MAX_PAYLOAD_BYTES) return reject(413, 'PayloadTooLarge');
    if (body.text.trim() === '') return reject(400, 'PayloadEmpty');
    const parsed = parseJson(body.text);
    if (!isObject(parsed) || !isObject(parsed['aps'])) return reject(400, 'BadPayload');
    // Ours: a VoIP push has an empty `aps`; a missed-call alert has an alert to show, localised by
    // the app (docs/protocol.md "Missed-call alerts"). APNs itself takes any well-formed `aps`.
    if (pushType === 'voip' ? Object.keys(parsed['aps']).length > 0 : !isLocalisedAlert(parsed['aps'])) return reject(400, 'BadPayload');
    if (!isObject(parsed[this.opts.payloadKey ?? 'callpayload'])) return reject(400, 'BadPayload');
    return null;
  }

  private tokenReply(token: string): Reply | null {
    const next = this.script.next(token);
    if (next === undefined) return null;
    if ('scripted' in next) return { ...next.scripted, reason: next.scripted.reason ?? DEFAULT_REASONS[next.scripted.status] };
    if (next.state === 'unregistered') return { status: 410, reason: 'Unregistered' };
    if (next.state === 'bad') return reject(400, 'BadDeviceToken');
    return null;
  }
}

/** `aps` with `alert: { "loc-key": string, "loc-args": string[] }`, as Apple documents a localised alert. */
function isLocalisedAlert(aps: Record<string, unknown>): boolean {
  const alert = aps['alert'];
  if (!isObject(alert) || typeof alert['loc-key'] !== 'string') return false;
  const args = alert['loc-args'];
  return args === undefined || (Array.isArray(args) && args.every((a) => typeof a === 'string'));
}

function checkRoute(req: Http2ServerRequest, token: string): Reply | null {
  if (req.method !== 'POST') return reject(405, 'MethodNotAllowed');
  if (!req.url.startsWith('/3/device/') || req.url.slice('/3/device/'.length).includes('/')) {
    return reject(404, 'BadPath');
  }
  if (token === '') return reject(400, 'MissingDeviceToken');
  if (!HEX_TOKEN.test(token)) return reject(400, 'BadDeviceToken');
  return null;
}

function reject(status: number, reason: string): Reply {
  return { status, reason };
}

function send(res: Http2ServerResponse, reply: Reply, apnsId: string): void {
  const headers: Record<string, string> = { 'apns-id': apnsId };
  if (reply.retryAfterSeconds !== undefined) headers['retry-after'] = String(reply.retryAfterSeconds);
  if (reply.status === 200) {
    res.writeHead(200, headers);
    res.end();
    return;
  }
  const body: { reason: string; timestamp?: number } = { reason: reply.reason ?? 'InternalServerError' };
  if (reply.status === 410) body.timestamp = reply.timestampMs ?? Date.now();
  res.writeHead(reply.status, { ...headers, 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}
