import { createHmac } from 'node:crypto';

/**
 * Signs a webhook as Standard Webhooks does (docs/webhooks.md "Verifying a webhook"):
 * `v1,<base64 HMAC-SHA256 of "<webhook-id>.<unix seconds>.<body>">`, keyed with the base64
 * after the secret's `whsec_`. node:crypto's HMAC, not the standardwebhooks package's: its
 * SHA-256 is JavaScript, several times the worker's CPU per request (docs/performance.md).
 */
export type WebhookSigner = (webhookId: string, timestampSeconds: number, body: string) => string;

const PREFIX = 'whsec_';

export function webhookSigner(secret: string): WebhookSigner {
  const key = Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');
  if (key.length === 0) throw new Error('a webhook secret cannot be empty');
  return (webhookId, timestampSeconds, body) => `v1,${createHmac('sha256', key).update(`${webhookId}.${timestampSeconds}.${body}`).digest('base64')}`;
}
