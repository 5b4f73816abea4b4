import { createHash } from 'node:crypto';
import type { CallChange } from '../calls/change.js';
import { answeredBy, calleeField, memberOf, shownName } from '../calls/model.js';
import { movedFrom, participantOf } from '../calls/participants.js';
import { missedBy } from '../calls/missed.js';
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

/**
 * The webhook events of one call change: call.created, call.accepted (a group call's first join)
 * and call.ended, a group call's `call.participant` per member it changed, `call.moved`, and
 * `call.missed` per invitee it made miss the call; renames and one-to-one ringing receipts have none.
 */
export function callEventsOf(change: CallChange): WebhookEvent[] {
  return [...changeEvents(change), ...missedEvents(change)];
}

/** `call.missed`, per invitee the change made miss the call (src/calls/missed.ts). */
function missedEvents(change: CallChange): WebhookEvent[] {
  const { call, atMs } = change;
  return missedBy(change).map((p) => ({
    type: 'call.missed',
    key: `${call.callId}.${call.revision}.x.${p.userId}`,
    atMs,
    data: {
      callId: call.callId,
      callerUserId: call.callerUserId,
      callerDisplayName: shownName(call),
      callerHandle: call.callerHandle,
      userId: p.userId,
      video: call.video,
      invitedAtMs: p.invitedAtMs ?? call.createdAtMs,
      occurredAtMs: atMs,
    },
  }));
}

function changeEvents(change: CallChange): WebhookEvent[] {
  const { call, atMs } = change;
  const key = `${call.callId}.${call.revision}`;
  const parties = { callId: call.callId, callerUserId: call.callerUserId, callerInstallationId: call.callerInstallationId, calleeUserId: calleeField(call), video: call.video };
  const screened = call.kind === 'pair' && call.screened ? { screened: call.screened } : undefined;
  const group =
    call.kind === 'group' ? { group: { title: call.title, members: call.members.map((m) => ({ userId: m.userId, state: m.state, ...(m.screened ? { screened: m.screened } : {}) })) } } : undefined;
  const participants = (change.subjects ?? []).flatMap((u): WebhookEvent[] => {
    const m = memberOf(call, u);
    if (!m) return [];
    const data = {
      ...{ callId: call.callId, callerUserId: call.callerUserId, userId: m.userId, state: m.state, installationId: m.state === 'joined' ? (m.installationId ?? null) : null, occurredAtMs: atMs },
      ...(m.screened ? { screened: m.screened } : {}),
    };
    return [{ type: 'call.participant', key: `${key}.p.${m.userId}`, atMs, data }];
  });
  switch (change.kind) {
    case 'created':
      return [{ type: 'call.created', key, atMs, data: { ...parties, createdAtMs: call.createdAtMs, expiresAtMs: call.expiresAtMs, ...screened, ...group } }];
    case 'answered':
      return [
        {
          type: 'call.accepted',
          key,
          atMs,
          data: { ...parties, createdAtMs: call.createdAtMs, acceptedAtMs: call.acceptedAtMs ?? atMs, answeredByInstallationId: answeredBy(call) ?? null },
        },
      ];
    case 'joined': {
      // The first join accepts a group call.
      const accepted: WebhookEvent[] =
        call.acceptedAtMs === atMs ? [{ type: 'call.accepted', key: `${key}.a`, atMs, data: { ...parties, createdAtMs: call.createdAtMs, acceptedAtMs: atMs, answeredByInstallationId: null, ...group } }] : [];
      return [...accepted, ...participants];
    }
    case 'member':
    case 'invited':
      return participants;
    case 'ringing':
      return call.kind === 'group' ? participants : [];
    case 'moved':
      return (change.subjects ?? []).flatMap((userId): WebhookEvent[] => {
        const to = participantOf(call, userId)?.installationId;
        const from = movedFrom(call, userId);
        if (!to || !from) return [];
        return [{ type: 'call.moved', key: `${key}.m.${userId}`, atMs, data: { callId: call.callId, callerUserId: call.callerUserId, userId, fromInstallationId: from, toInstallationId: to, occurredAtMs: atMs } }];
      });
    case 'ended': {
      const o = callOutcome(call);
      return [
        {
          type: 'call.ended',
          key,
          atMs,
          data: {
            ...parties,
            createdAtMs: call.createdAtMs,
            acceptedAtMs: call.acceptedAtMs ?? null,
            answeredByInstallationId: answeredBy(call) ?? null,
            endedAtMs: o.endedAtMs,
            endedBy: call.endedBy ?? 'system',
            endedByInstallationId: call.endedByInstallationId || null,
            reasons: { caller: reasonSeenBy(call, 'caller'), callee: reasonSeenBy(call, 'callee') },
            ringingMs: o.ringingMs,
            talkMs: o.talkMs,
            missed: o.missed,
            ...screened,
            ...group,
          },
        },
      ];
    }
    default:
      return [];
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
