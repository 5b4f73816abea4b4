/**
 * What one push attempt came to, as the push worker needs it:
 *  - ok: the provider accepted the message for delivery (not delivered, not rung);
 *  - invalidToken: the provider says the token will never work again: remove the registration
 *    (APNs 410 names when it stopped working: `invalidSinceMs`);
 *  - retry: a transient failure (throttling, provider trouble, network); try again later,
 *    not before `retryAfterMs` when the provider named a time;
 *  - misconfigured: the provider refused the app's credentials, key, topic or project: no send
 *    for this app can succeed until its configuration is fixed (docs/push-apps.md);
 *  - fatal: retrying the same request cannot help (a malformed request).
 *
 * `reason` is the provider's reason code (e.g. "Unregistered", "UNAVAILABLE") or a short
 * description such as "status 500": never a token, a credential or a payload, so it can be
 * logged and stored with a failed job.
 */
export type SendResult =
  | { ok: true; id?: string }
  | { ok: false; kind: 'invalidToken'; reason: string; invalidSinceMs?: number }
  | { ok: false; kind: 'retry'; reason: string; status?: number; retryAfterMs?: number }
  | { ok: false; kind: 'misconfigured'; reason: string; status?: number }
  | { ok: false; kind: 'fatal'; reason: string; status?: number };

export type SendFailure = Extract<SendResult, { ok: false }>;
