import { ApnsKeyError, ApnsProviderToken } from './apnsProviderToken.js';
import type { Http2Pool, Http2Response } from './http2Pool.js';
import { headerValue, parseJsonBody, reasonCode, retryOrFatal, sendWithCredential } from './providerResponse.js';
import type { SendResult } from './sendResult.js';

/**
 * iOS VoIP invitations (docs/protocol.md "iOS VoIP invitation"): one HTTP/2 POST per device over the shared pool, with the
 * header names the protocol fixes (`ios-push-type`, `ios-topic`, `ios-priority`, `ios-expiration`).
 * A 200 means the provider accepted the push for delivery, nothing more.
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
  /** IOS_BUNDLE_ID; the topic is `<bundleId>.voip`. */
  bundleId: string;
  pool: Http2Pool;
  timeoutMs?: number;
  tokenRefreshMs?: number;
  /** Wall clock in epoch milliseconds; injectable for tests. */
  now?: () => number;
}

// Reasons meaning this token will never be delivered to: the registration must go.
const INVALID_TOKEN_REASONS = new Set(['BadDeviceToken', 'DeviceTokenNotForTopic', 'Unregistered']);
const REJECTED_PROVIDER_TOKEN = new Set(['ExpiredProviderToken', 'InvalidProviderToken']);

export class ApnsSender {
  private readonly urls: Record<ApnsEnvironment, string>;
  private readonly topic: string;
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

  /** Sends one VoIP push carrying `callpayload` (the invitation, docs/protocol.md "Events") to one device. */
  async sendVoip(target: ApnsTarget, callpayload: object): Promise<SendResult> {
    const origin = this.urls[target.environment];
    if (origin === undefined) throw new TypeError('APNs environment must be production or development');
    const path = `/3/device/${encodeURIComponent(target.token)}`;
    const body = JSON.stringify({ aps: {}, callpayload });

    return sendWithCredential<string>({
      credential: async () => {
        try {
          return await this.providerToken.get();
        } catch (err) {
          if (err instanceof ApnsKeyError) return { ok: false, kind: 'fatal', reason: 'unusable provider key' };
          throw err;
        }
      },
      send: (jwt) =>
        this.pool.request(
          origin,
          {
            method: 'POST',
            path,
            headers: {
              authorization: `bearer ${jwt}`,
              'ios-push-type': 'voip',
              'ios-topic': this.topic,
              'ios-priority': '10',
              'ios-expiration': '0',
              'content-type': 'application/json',
            },
            body,
          },
          this.timeoutMs,
        ),
      // A fresh token refused again means the key, key ID or team ID is wrong: fatal (classify).
      refusesCredential: (res) => res.status === 403 && REJECTED_PROVIDER_TOKEN.has(reasonOf(res)),
      invalidate: (jwt) => this.providerToken.invalidate(jwt),
      classify: (res) => this.classify(res, res.status === 200 ? '' : reasonOf(res)),
    });
  }

  private classify(res: Http2Response, reason: string): SendResult {
    const { status } = res;
    if (status === 200) {
      const id = headerValue(res.headers['apns-id']) ?? headerValue(res.headers['ios-id']);
      return id === undefined ? { ok: true } : { ok: true, id };
    }
    if (status === 410 || (status === 400 && INVALID_TOKEN_REASONS.has(reason))) {
      return { ok: false, kind: 'invalidToken', reason };
    }
    return retryOrFatal(res, reason, this.now());
  }
}

/** APNs error bodies are `{"reason":"BadDeviceToken"}` (410 adds `timestamp`): the reason code. */
function reasonOf(res: Http2Response): string {
  const json = parseJsonBody(res.body);
  return reasonCode(json !== null && typeof json === 'object' ? (json as { reason?: unknown }).reason : undefined, res.status);
}
