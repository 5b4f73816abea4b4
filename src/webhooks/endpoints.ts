import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { configError, parseNamedList, type Config } from '../config/config.js';
import { isPrivateNetworkHost } from './privateNetwork.js';

/**
 * The webhook endpoints (docs/webhooks.md "Configuration"): WEBHOOKS (JSON) or WEBHOOKS_FILE,
 * validated at start; an error names the endpoint and the field.
 */

export const WEBHOOK_EVENT_TYPES = ['call.created', 'call.accepted', 'call.ended', 'call.participant', 'call.moved', 'call.missed', 'push.token_removed'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/**
 * What an endpoint that names no events gets: the first four types. Those added since
 * (`call.participant` with group calls, `call.moved` with moving a call, `call.missed`) go only to
 * endpoints that name them, so a receiver written for the first four never sees a type it does
 * not know (docs/webhooks.md "Configuration").
 */
export const DEFAULT_WEBHOOK_EVENTS: readonly WebhookEventType[] = ['call.created', 'call.accepted', 'call.ended', 'push.token_removed'];

/** A Standard Webhooks secret: `whsec_` and the base64 of 24 to 64 random bytes. */
const secretSchema = z.string().refine((s) => {
  const m = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(s);
  if (!m) return false;
  const bytes = Buffer.from(m[1]!, 'base64').length;
  return bytes >= 24 && bytes <= 64;
}, 'must be "whsec_" and the base64 of 24 to 64 random bytes');

const endpointSchema = z
  .object({
    /** Names the endpoint in metrics, logs, dead letters and the webhook-id. */
    id: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1-64 letters, digits, _ or -'),
    /** `https://`, or `http://` only on a private network (docs/webhooks.md "Private networks"). */
    url: z.url({ protocol: /^https?$/ }).superRefine((url, ctx) => {
      const { protocol, host, hostname } = new URL(url);
      if (protocol === 'http:' && !isPrivateNetworkHost(hostname)) {
        // Names the host only: the rest of the URL may carry credentials.
        ctx.addIssue({ code: 'custom', message: `http:// to ${host}, which is not on a private network (docs/webhooks.md "Private networks"): use https://` });
      }
    }),
    /** One secret, or two while it rotates (every request is then signed with both). */
    secret: z.union([secretSchema, z.tuple([secretSchema, secretSchema])]),
    /** The event types to send (default: DEFAULT_WEBHOOK_EVENTS). */
    events: z.array(z.enum(WEBHOOK_EVENT_TYPES)).min(1).optional(),
  })
  .strict();

export interface WebhookEndpoint {
  id: string;
  url: string;
  secrets: string[];
  events: ReadonlySet<WebhookEventType>;
}

/** Validates WEBHOOKS's JSON (an array of endpoints); an error names the endpoint and the field. */
export function parseWebhookEndpoints(json: string, source = 'WEBHOOKS'): WebhookEndpoint[] {
  return parseNamedList(json, source, z.array(endpointSchema), 'endpoint', 'id').map((e) => ({
    id: e.id,
    url: e.url,
    secrets: typeof e.secret === 'string' ? [e.secret] : [...e.secret],
    events: new Set(e.events ?? DEFAULT_WEBHOOK_EVENTS),
  }));
}

/** The configured endpoints (none when neither WEBHOOKS nor WEBHOOKS_FILE is set). */
export function webhookEndpoints(c: Pick<Config, 'WEBHOOKS' | 'WEBHOOKS_FILE'>, readFile: (path: string) => string = (p) => readFileSync(p, 'utf8')): WebhookEndpoint[] {
  if (c.WEBHOOKS) return parseWebhookEndpoints(c.WEBHOOKS);
  if (!c.WEBHOOKS_FILE) return [];
  let json: string;
  try {
    json = readFile(c.WEBHOOKS_FILE);
  } catch (err) {
    throw configError([`WEBHOOKS_FILE: cannot read ${c.WEBHOOKS_FILE} (${(err as NodeJS.ErrnoException).code ?? 'error'})`]);
  }
  return parseWebhookEndpoints(json, 'WEBHOOKS_FILE');
}
