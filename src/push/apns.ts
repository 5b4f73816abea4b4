import { createHash } from 'node:crypto';
import { DEFAULT_PUSH_PAYLOAD_KEY } from '../config/config.js';
import type { MissedPayload } from '../events/payloads.js';
import { ApnsKeyError, ApnsProviderToken } from './apnsProviderToken.js';
import type { Http2Pool, Http2Response } from './http2Pool.js';
import { headerValue, parseJsonBody, reasonCode, retryOrFatal, sendWithCredential } from './providerResponse.js';
import type { SendResult } from './sendResult.js';

/**
 * iOS VoIP invitations (docs/protocol.md "iOS VoIP invitation") and missed-call alerts
 * (docs/protocol.md "Missed-call alerts"): one HTTP/2 POST per device over
 * the shared pool, with Apple's header names (`apns-push-type`, `apns-topic`, `apns-priority`,
 * `apns-expiration`; docs/protocol.md "Names sent to Apple and Google"). A 200 means the provider
 * accepted the push for delivery, nothing more. Answers are handled as docs/protocol.md "What is
 * not sent, retries and invalid tokens" says.
 */

export const APNS_PRODUCTION_URL = 'https://api.push.apple.com';
export const APNS_SANDBOX_URL = 'https://api.sandbox.push.apple.com';
const DEFAULT_TIMEOUT_MS = 10_000;

export type ApnsEnvironment = 'production' | 'development';

export interface ApnsTarget {
  token: string;
  /** The app build's push environment: development builds get sandbox tokens. */
  environment: ApnsEnvironment;
}

export interface ApnsSenderOptions {
  /** IOS_PUSH_URL. */
  productionUrl?: string;
  /** IOS_PUSH_SANDBOX_URL. */
  sandboxUrl?: string;
  /** IOS_PUSH_KEY_FILE's content. */
  keyPem: string;
  keyId: string;
  teamId: string;
  /** IOS_BUNDLE_ID; the VoIP topic is `<bundleId>.voip`, the alerts' the bundle ID itself. */
  bundleId: string;
  /** PUSH_PAYLOAD_KEY: the body key that carries the invitation. Default `callpayload`. */
  payloadKey?: string;
  pool: Http2Pool;
  timeoutMs?: number;
  tokenRefreshMs?: number;
  /** Wall clock in epoch milliseconds; injectable for tests. */
  now?: () => number;
}

// 400 reasons meaning this token will never be delivered to: the registration must go (every 410 too).
const INVALID_TOKEN_REASONS = new Set(['BadDeviceToken', 'DeviceTokenNotForTopic']);
const REJECTED_PROVIDER_TOKEN = new Set(['ExpiredProviderToken', 'InvalidProviderToken']);
// 400 reasons about the app's topic, not the device: every push of this app fails the same way (403s too).
const TOPIC_REASONS = new Set(['MissingTopic', 'BadTopic', 'TopicDisallowed']);
// The server closes this connection: the push was not taken and may go on a new connection.
const RECONNECT_REASONS = new Set(['Shutdown', 'IdleTimeout']);

/** What a missed-call alert says (docs/protocol.md "Missed-call alerts"). */
export interface MissedCallAlert {
  payload: MissedPayload;
  /** The app's `loc-key`: its Localizable.strings entry, "Missed call from %@". */
  locKey: string;
  /** The end of the alert's lifetime (epoch ms): APNs keeps it for an offline device until then. */
  expiresAtMs: number;
}

/** APNs takes a collapse ID of at most 64 bytes; a longer callId (up to 128) collapses by its hash. */
const MAX_COLLAPSE_ID_BYTES = 64;
export function collapseIdOf(callId: string): string {
  return Buffer.byteLength(callId) <= MAX_COLLAPSE_ID_BYTES ? callId : createHash('sha256').update(callId).digest('base64url');
}

export class ApnsSender {
  private readonly urls: Record<ApnsEnvironment, string>;
  private readonly topic: string;
  private readonly bundleId: string;
  private readonly payloadKey: string;
  private readonly pool: Http2Pool;
  private readonly timeoutMs: number;
  private readonly now: () => number;
  readonly providerToken: ApnsProviderToken;

  constructor(options: ApnsSenderOptions) {
    if (!options.bundleId) throw new TypeError('APNs bundle ID is required');
    this.urls = {
      production: options.productionUrl ?? APNS_PRODUCTION_URL,
      development: options.sandboxUrl ?? APNS_SANDBOX_URL,
    };
    this.topic = `${options.bundleId}.voip`;
    this.bundleId = options.bundleId;
    this.payloadKey = options.payloadKey ?? DEFAULT_PUSH_PAYLOAD_KEY;
    this.pool = options.pool;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.now = options.now ?? Date.now;
    this.providerToken = new ApnsProviderToken({
      keyPem: options.keyPem,
      keyId: options.keyId,
      teamId: options.teamId,
      refreshAfterMs: options.tokenRefreshMs,
      now: this.now,
    });
  }

  /** Sends one VoIP push carrying the invitation (docs/protocol.md "Events") under the payload key to one device. */
  sendVoip(target: ApnsTarget, invitation: object): Promise<SendResult> {
    // A late call must not ring: expiration 0 means now or never.
    const headers = { 'apns-push-type': 'voip', 'apns-topic': this.topic, 'apns-priority': '10', 'apns-expiration': '0' };
    return this.post(target, headers, JSON.stringify({ aps: {}, [this.payloadKey]: invitation }));
  }

  /**
   * Sends one missed-call alert to an `iosAlert` token (the app's regular device token): an
   * ordinary alert push to the bundle ID, which APNs stores for an offline phone until its
   * expiration. Priority 10 (deliver at once: it shows an alert); the collapse ID is the call's,
   * so a repeat replaces the alert instead of adding one; `thread-id` groups a caller's alerts.
   * The app localises `loc-key` with `loc-args` (the caller's name).
   */
  sendAlert(target: ApnsTarget, alert: MissedCallAlert): Promise<SendResult> {
    const { payload } = alert;
    const headers = {
      'apns-push-type': 'alert',
      'apns-topic': this.bundleId,
      'apns-priority': '10',
      'apns-expiration': String(Math.floor(alert.expiresAtMs / 1000)),
      'apns-collapse-id': collapseIdOf(payload.callId),
    };
    const aps = { alert: { 'loc-key': alert.locKey, 'loc-args': [payload.displayName] }, 'thread-id': payload.callerUserId };
    return this.post(target, headers, JSON.stringify({ aps, [this.payloadKey]: payload }));
  }

  private async post(target: ApnsTarget, pushHeaders: Record<string, string>, body: string): Promise<SendResult> {
    const origin = this.urls[target.environment];
    if (origin === undefined) throw new TypeError('APNs environment must be production or development');
    const path = `/3/device/${encodeURIComponent(target.token)}`;

    return sendWithCredential<string>({
      credential: async () => {
        try {
          return await this.providerToken.get();
        } catch (err) {
          if (err instanceof ApnsKeyError) return { ok: false, kind: 'misconfigured', reason: 'unusable provider key' };
          throw err;
        }
      },
      send: (jwt) =>
        this.pool.request(
          origin,
          {
            method: 'POST',
            path,
            headers: { authorization: `bearer ${jwt}`, ...pushHeaders },
            body,
          },
          this.timeoutMs,
        ),
      // A fresh token refused again means the key, key ID or team ID is wrong: fatal (classify).
      refusesCredential: (res) => res.status === 403 && REJECTED_PROVIDER_TOKEN.has(reasonOf(res)),
      invalidate: (jwt) => this.providerToken.invalidate(jwt),
      asksReconnect: (res) => res.status !== 200 && RECONNECT_REASONS.has(reasonOf(res)),
      reconnect: () => this.pool.retire(origin),
      classify: (res) => this.classify(res),
    });
  }

  private classify(res: Http2Response): SendResult {
    const { status } = res;
    if (status === 200) {
      const id = headerValue(res.headers['apns-id']);
      return id === undefined ? { ok: true } : { ok: true, id };
    }
    const reason = reasonOf(res);
    if (status === 410) {
      const since = errorBody(res).timestamp;
      return typeof since === 'number' && Number.isFinite(since)
        ? { ok: false, kind: 'invalidToken', reason, invalidSinceMs: since }
        : { ok: false, kind: 'invalidToken', reason };
    }
    if (status === 400 && INVALID_TOKEN_REASONS.has(reason)) return { ok: false, kind: 'invalidToken', reason };
    if (status === 403 || (status === 400 && TOPIC_REASONS.has(reason))) return { ok: false, kind: 'misconfigured', reason, status };
    return retryOrFatal(res, reason, this.now());
  }
}

/** APNs error bodies are `{"reason":"BadDeviceToken"}`; a 410 adds `timestamp` (epoch ms). */
function errorBody(res: Http2Response): { reason?: unknown; timestamp?: unknown } {
  const json = parseJsonBody(res.body);
  return json !== null && typeof json === 'object' ? (json as { reason?: unknown; timestamp?: unknown }) : {};
}

function reasonOf(res: Http2Response): string {
  return reasonCode(errorBody(res).reason, res.status);
}
