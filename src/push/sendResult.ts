/**
 * What one push attempt came to, as the push worker needs it:
 *  - ok: the provider accepted the message for delivery (not delivered, not rung);
 *  - invalidToken: the provider says the token will never work again: remove the registration;
 *  - retry: a transient failure (throttling, provider trouble, network); try again later,
 *    not before `retryAfterMs` when the provider named a time;
 *  - fatal: retrying the same request cannot help (bad credentials, a malformed request).
 *
 * `reason` is the provider's reason code (e.g. "Unregistered", "UNAVAILABLE") or a short
 * description such as "status 500": never a token, a credential or a payload, so it can be
 * logged and stored with a failed job.
 */
export type SendResult =
  | { ok: true; id?: string }
  | { ok: false; kind: 'invalidToken'; reason: string }
  | { ok: false; kind: 'retry'; reason: string; status?: number; retryAfterMs?: number }
  | { ok: false; kind: 'fatal'; reason: string; status?: number };

export type SendFailure = Extract<SendResult, { ok: false }>;
