import { createHash } from 'node:crypto';
import type { CallChange } from '../calls/change.js';
import { callOutcome, reasonSeenBy } from '../history/callHistory.js';
import type { PushTokenKind } from '../push/kinds.js';
import type { WebhookEventType } from './endpoints.js';
import type { z } from 'zod';
import type { webhookBodies } from './schema.js';

/**
 * The webhook events (docs/webhooks.md "Events"): what the app's backend hears about calls and
 * push tokens. A call event is derived from the outbox entry of the change, as the devices' events
 * are, so a change that did not commit sends none and one that did is sent at least once.
 */
export type WebhookEvent = {
  [T in WebhookEventType]: {
    type: T;
    /** Stable per event: with the endpoint's id it makes the webhook-id a receiver deduplicates by. */
    key: string;
    /** When it happened (Redis time of the change, ms). */
    atMs: number;
    data: z.infer<(typeof webhookBodies)[T]>['data'];
  };
}[WebhookEventType];

/** The webhook event of one call change, if it has one (renames have none). */
export function callEventOf(change: CallChange): WebhookEvent | undefined {
  const { call, atMs } = change;
  const key = `${call.callId}.${call.revision}`;
  const parties = { callId: call.callId, callerUserId: call.callerUserId, callerInstallationId: call.callerInstallationId, calleeUserId: call.calleeUserId, video: call.video };
  switch (change.kind) {
    case 'created':
      return { type: 'call.created', key, atMs, data: { ...parties, createdAtMs: call.createdAtMs, expiresAtMs: call.expiresAtMs } };
    case 'answered':
      return {
        type: 'call.accepted',
        key,
        atMs,
        data: { ...parties, createdAtMs: call.createdAtMs, acceptedAtMs: call.acceptedAtMs ?? atMs, answeredByInstallationId: call.answeredByInstallationId ?? null },
      };
    case 'ended': {
      const o = callOutcome(call);
      return {
        type: 'call.ended',
        key,
        atMs,
        data: {
          ...parties,
          createdAtMs: call.createdAtMs,
          acceptedAtMs: call.acceptedAtMs ?? null,
          answeredByInstallationId: call.answeredByInstallationId ?? null,
          endedAtMs: o.endedAtMs,
          endedBy: call.endedBy ?? 'system',
          endedByInstallationId: call.endedByInstallationId || null,
          reasons: { caller: reasonSeenBy(call, 'caller'), callee: reasonSeenBy(call, 'callee') },
          ringingMs: o.ringingMs,
          talkMs: o.talkMs,
          missed: o.missed,
        },
      };
    }
    default:
      return undefined;
  }
}

/** A push token the provider reported invalid, removed (src/push/dispatcher.ts). */
export function tokenRemovedEvent(r: { userId: string; installationId: string; kind: PushTokenKind; appId: string; token: string; reason: string }, atMs: number): WebhookEvent {
  const tokenHash = createHash('sha256').update(r.token).digest('base64url');
  return {
    type: 'push.token_removed',
    key: `token.${r.kind}.${tokenHash}`,
    atMs,
    data: { userId: r.userId, installationId: r.installationId, kind: r.kind, appId: r.appId, tokenSuffix: r.token.slice(-6), reason: r.reason, removedAtMs: atMs },
  };
}

/** The request body: `{ type, timestamp, data }` (Standard Webhooks' shape). */
export function webhookBody(e: WebhookEvent): string {
  return JSON.stringify({ type: e.type, timestamp: new Date(e.atMs).toISOString(), data: e.data });
}

/** The webhook-id of one event for one endpoint: the same on every attempt, replay and relay retry. */
export function webhookId(endpointId: string, e: Pick<WebhookEvent, 'key'>): string {
  return `msg_${createHash('sha256').update(`${endpointId}\n${e.key}`).digest('base64url').slice(0, 27)}`;
}
