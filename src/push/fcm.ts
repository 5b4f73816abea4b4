import { FcmAccessToken, FcmAuthError, type ServiceAccount } from './fcmAccessToken.js';
import type { Http2Pool, Http2Response } from './http2Pool.js';
import { DEFAULT_PUSH_PAYLOAD_KEY } from '../config/config.js';
import { parseJsonBody, reasonCode, retryOrFatal, sendWithCredential } from './providerResponse.js';
import type { SendResult } from './sendResult.js';

/**
 * Android data messages through the FCM HTTP v1 API (docs/protocol.md "Android invitation", "Android push signals"), over the shared HTTP/2
 * pool. Data messages only: the app's code presents the call, and a notification block would
 * make the system show one instead of waking the app.
 */

export const FCM_URL = 'https://fcm.googleapis.com';
const DEFAULT_TIMEOUT_MS = 10_000;
/** FCM's longest ttl (28 days); longer values are rejected as INVALID_ARGUMENT. */
export const FCM_MAX_TTL_SECONDS = 28 * 24 * 3600;

export interface FcmMessage {
  /** HIGH for invitations (they must wake the device), NORMAL for signals (they show nothing). */
  priority: 'HIGH' | 'NORMAL';
  /** Whole seconds the message may wait for an offline device; at least 1. */
  ttlSeconds: number;
  /** The invitation or signal, sent under the payload key (docs/protocol.md "Android invitation"). */
  callpayload: object;
  /** A missed-call alert's callId: FCM keeps only the newest message of a collapse key for an offline device. */
  collapseKey?: string;
}

/** What FcmSender needs from an access-token source (FcmAccessToken, or a test double). */
export interface AccessTokenSource {
  get(): Promise<string>;
  invalidate(rejected?: string): void;
}

export interface FcmSenderOptions {
  /** ANDROID_PUSH_URL. */
  url?: string;
  /** ANDROID_PROJECT_ID. */
  projectId: string;
  /** The parsed ANDROID_SERVICE_ACCOUNT_FILE; or give `accessToken` instead. */
  serviceAccount?: ServiceAccount;
  accessToken?: AccessTokenSource;
  pool: Http2Pool;
  /** PUSH_PAYLOAD_KEY: the data key that carries the payload. Default `callpayload`. */
  payloadKey?: string;
  timeoutMs?: number;
  /** Wall clock in epoch milliseconds; injectable for tests. */
  now?: () => number;
}

// FCM's error codes (the FcmError detail) that mean this app's project, service account or APNs
// setup is wrong, not the device: every send of this app fails the same way (docs/push-apps.md).
const CONFIGURATION_ERRORS = new Set(['SENDER_ID_MISMATCH', 'THIRD_PARTY_AUTH_ERROR']);

interface FcmErrorBody {
  status?: string;
  message?: string;
  errorCode?: string;
}

export class FcmSender {
  private readonly origin: string;
  private readonly path: string;
  private readonly pool: Http2Pool;
  private readonly payloadKey: string;
  private readonly timeoutMs: number;
  private readonly now: () => number;
  readonly accessToken: AccessTokenSource;

  constructor(options: FcmSenderOptions) {
    if (!options.projectId) throw new TypeError('FCM project ID is required');
    const source =
      options.accessToken ??
      (options.serviceAccount && new FcmAccessToken({ serviceAccount: options.serviceAccount, now: options.now, timeoutMs: options.timeoutMs }));
    if (!source) throw new TypeError('FCM needs a service account or an access-token source');
    this.accessToken = source;
    this.origin = options.url ?? FCM_URL;
    this.path = `/v1/projects/${encodeURIComponent(options.projectId)}/messages:send`;
    this.pool = options.pool;
    this.payloadKey = options.payloadKey ?? DEFAULT_PUSH_PAYLOAD_KEY;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.now = options.now ?? Date.now;
  }

  /**
   * Sends one data message with the payload serialized as a JSON string (data values are
   * strings). Throws RangeError for a ttl that is not a whole number of seconds ≥ 1: a "0s"
   * message is dropped whenever the device is offline, so the call would never ring.
   */
  async send(token: string, message: FcmMessage): Promise<SendResult> {
    const { ttlSeconds } = message;
    if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > FCM_MAX_TTL_SECONDS) {
      throw new RangeError(`FCM ttl must be a whole number of seconds from 1 to ${FCM_MAX_TTL_SECONDS}`);
    }
    if (message.priority !== 'HIGH' && message.priority !== 'NORMAL') {
      throw new RangeError('FCM priority must be HIGH or NORMAL');
    }
    const body = JSON.stringify({
      message: {
        token,
        android: { priority: message.priority, ttl: `${ttlSeconds}s`, ...(message.collapseKey === undefined ? {} : { collapse_key: message.collapseKey }) },
        data: { [this.payloadKey]: JSON.stringify(message.callpayload) },
      },
    });

    return sendWithCredential<string>({
      credential: async () => {
        try {
          return await this.accessToken.get();
        } catch (err) {
          if (!(err instanceof FcmAuthError)) throw err;
          const reason =
            err.status !== undefined ? `token exchange status ${err.status}` : err.transient ? 'token exchange failed' : 'unusable service account';
          return err.transient
            ? { ok: false, kind: 'retry', reason }
            : { ok: false, kind: 'misconfigured', reason, ...(err.status === undefined ? {} : { status: err.status }) };
        }
      },
      send: (accessToken) =>
        this.pool.request(
          this.origin,
          {
            method: 'POST',
            path: this.path,
            headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' },
            body,
          },
          this.timeoutMs,
        ),
      // A fresh token refused again means the account lacks access to the project. A 401
      // THIRD_PARTY_AUTH_ERROR is about the app's APNs or web-push credentials held by FCM, not ours.
      refusesCredential: (res) => res.status === 401 && errorOf(parseJsonBody(res.body)).errorCode !== 'THIRD_PARTY_AUTH_ERROR',
      invalidate: (accessToken) => this.accessToken.invalidate(accessToken),
      classify: (res) => this.classify(res),
    });
  }

  private classify(res: Http2Response): SendResult {
    const { status } = res;
    const json = parseJsonBody(res.body);
    if (status === 200) {
      const name = (json as { name?: unknown } | undefined)?.name;
      return typeof name === 'string' ? { ok: true, id: name } : { ok: true };
    }
    const error = errorOf(json);
    const reason = reasonCode(error.errorCode ?? error.status, status);
    if ((status === 404 && error.errorCode === 'UNREGISTERED') || (status === 400 && isBadRegistrationToken(error))) {
      return { ok: false, kind: 'invalidToken', reason };
    }
    // 401 and 403 refuse the project or the account; a 404 that is not UNREGISTERED names a project that does not exist.
    if (CONFIGURATION_ERRORS.has(error.errorCode ?? '') || status === 401 || status === 403 || status === 404) {
      return { ok: false, kind: 'misconfigured', reason, status };
    }
    return retryOrFatal(res, reason, this.now());
  }
}

/**
 * INVALID_ARGUMENT covers every malformed field; only the ones about the registration token
 * mean the token should be removed. FCM says so in the message ("The registration token is not
 * a valid FCM registration token") and, for a bad `message.token`, in a field violation.
 */
function isBadRegistrationToken(e: FcmErrorBody & { fields?: string[] }): boolean {
  if (e.errorCode !== 'INVALID_ARGUMENT' && e.status !== 'INVALID_ARGUMENT') return false;
  return /registration token/i.test(e.message ?? '') || (e.fields ?? []).includes('message.token');
}

function errorOf(json: unknown): FcmErrorBody & { fields?: string[] } {
  const error = (json as { error?: unknown } | undefined)?.error;
  if (error === null || typeof error !== 'object') return {};
  const e = error as { status?: unknown; message?: unknown; details?: unknown };
  const out: FcmErrorBody & { fields?: string[] } = {};
  if (typeof e.status === 'string') out.status = e.status;
  if (typeof e.message === 'string') out.message = e.message;
  if (Array.isArray(e.details)) {
    for (const d of e.details as unknown[]) {
      if (d === null || typeof d !== 'object') continue;
      const detail = d as { '@type'?: unknown; errorCode?: unknown; fieldViolations?: unknown };
      if (typeof detail.errorCode === 'string') out.errorCode = detail.errorCode;
      if (Array.isArray(detail.fieldViolations)) {
        out.fields = detail.fieldViolations
          .map((v) => (v as { field?: unknown } | null)?.field)
          .filter((f): f is string => typeof f === 'string');
      }
    }
  }
  return out;
}
