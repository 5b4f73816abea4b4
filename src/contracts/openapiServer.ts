import * as s from '../commands/schemas.js';
import { CALL_ID, COMMON, T0, callIdParam, json, problems, ref, schema } from './openapiParts.js';
import { webhookBodies } from '../webhooks/schema.js';
import { serverPolicyPaths } from './openapiPolicy.js';

/**
 * The OpenAPI document's parts for the app's own backend and the call history (docs/server-api.md,
 * docs/webhooks.md, docs/call-history.md): the history read, the server API's routes, and the
 * webhooks the server sends.
 */

const HISTORY_ENTRY = {
  callId: CALL_ID,
  direction: 'incoming',
  peerUserId: 'alice',
  callerUserId: 'alice',
  calleeUserId: 'bob',
  video: false,
  createdAtMs: T0,
  acceptedAtMs: null,
  answeredByInstallationId: null,
  endedAtMs: T0 + 45_000,
  endReason: 'unanswered',
  endedBy: 'system',
  missed: true,
  ringingMs: 45_000,
  talkMs: 0,
};
const SERVER_CALL = {
  ...{ callId: CALL_ID, state: 'ended', revision: '2' },
  ...{ callerUserId: 'alice', callerInstallationId: 'alice-phone', callerDisplayName: 'Alice', callerHandle: 'app:alice', calleeUserId: 'bob', video: false },
  ...{ createdAtMs: T0, expiresAtMs: T0 + 45_000, endedAtMs: T0 + 5_000, endReason: 'remoteEnded', endedBy: 'system' },
};
/** A small JSON answer: its properties (all required) and an example. */
const small = (description: string, props: Record<string, 'string' | 'boolean'>, example: Record<string, unknown>) => ({
  description,
  content: { 'application/json': { schema: { type: 'object', properties: Object.fromEntries(Object.entries(props).map(([k, t]) => [k, { type: t }])), required: Object.keys(props) }, example } },
});
const PAGE_PARAMS = [
  { name: 'cursor', in: 'query', required: false, description: '`nextCursor` of the previous page; absent for the newest.', schema: { type: 'string' } },
  { name: 'limit', in: 'query', required: false, description: 'Records per page, 1 to 200 (default 50).', schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 } },
];
const HISTORY_PARAMS = [...PAGE_PARAMS, { name: 'missed', in: 'query', required: false, description: '`true`: missed calls only.', schema: { type: 'boolean', default: false } }];
const userIdParam = { name: 'userId', in: 'path', required: true, description: 'The userId (the `sub` of its session tokens).', schema: schema(s.principalId), example: 'bob' };
const SERVER = [{ serverKey: [] }];
const SERVER_PROBLEMS = ['unauthorized', 'forbidden', 'rate_limited', 'internal', 'unavailable'] as const;

export const serverTags = [
  { name: 'Call history', description: 'Every ended call, from each party’s point of view (docs/call-history.md).' },
  { name: 'Server API', description: 'For the app’s own backend, with a server API key (docs/server-api.md).' },
];

export const serverSecurityScheme = {
  serverKey: { type: 'http', scheme: 'bearer', description: 'A server API key (`sk_…`); the server keeps only its SHA-256 hash (SERVER_API_KEYS). Devices never hold one.' },
};

export function serverSchemas(): Record<string, unknown> {
  const historyPage = schema(s.callHistoryPage);
  const calls = (historyPage['properties'] as Record<string, Record<string, unknown>>)['calls']!;
  calls['items'] = ref('CallHistoryEntry');
  return {
    CallHistoryEntry: schema(s.callHistoryEntry),
    CallHistoryPage: historyPage,
    ServerEndCall: schema(s.serverEndCallBody, 'input'),
    ServerCall: schema(s.serverCall),
    ServerEndCallResult: schema(s.serverEndCallResult),
    ServerRemoveParticipantResult: schema(s.serverRemoveParticipantResult),
    ActiveCalls: schema(s.activeCalls),
    SignOutResult: schema(s.signOutResult),
    ErasureResult: schema(s.erasureResult),
    WebhookEndpoints: schema(s.webhookEndpoints),
    DeadLettersPage: schema(s.deadLettersPage),
    ...Object.fromEntries(Object.entries(webhookBodies).map(([type, body]) => [webhookSchemaName(type), schema(body)])),
  };
}

const webhookSchemaName = (type: string) => `Webhook${type.split(/[._]/).map((w) => w[0]!.toUpperCase() + w.slice(1)).join('')}`;

const historyResponse = (summary: string) => ({
  '200': { description: summary, content: json('CallHistoryPage', { missed: { summary: 'A missed call', value: { calls: [HISTORY_ENTRY], nextCursor: null } } }) },
});

/** GET /v1/calls: the device's own history (on the /v1/calls path beside create). */
export const historyOperation = {
  operationId: 'listCallHistory',
  tags: ['Call history'],
  summary: 'This user’s call history, newest first',
  description:
    'Every call of the session user that ended within `CALL_RECORD_RETENTION_DAYS`, from this user’s point of view ' +
    '(direction, the other party, the end reason as this user was told it, ringing and talk time, `missed`), ' +
    'newest first by `endedAtMs`, a page at a time. For the recents screen.',
  parameters: HISTORY_PARAMS,
  responses: { ...historyResponse('One page of the history'), ...problems('invalid_request', ...COMMON) },
};

export function serverPaths(): Record<string, unknown> {
  return {
    '/v1/server/calls/{id}': {
      parameters: [callIdParam],
      get: {
        operationId: 'serverGetCall',
        tags: ['Server API'],
        security: SERVER,
        summary: 'Read any call, every field',
        description: 'The call as stored (kept `CALL_RETENTION_MS` after it ends), whoever its parties.',
        responses: { '200': { description: 'The call', content: json('ServerCall', { ended: { summary: 'Ended by the server API', value: SERVER_CALL } }) }, ...problems('invalid_request', 'not_found', ...SERVER_PROBLEMS) },
      },
    },
    '/v1/server/calls/{id}/end': {
      parameters: [callIdParam],
      post: {
        operationId: 'serverEndCall',
        tags: ['Server API'],
        security: SERVER,
        summary: 'End any call',
        description:
          'Ends a ringing or accepted call as the system does: every device of both sides that is told of an end gets ' +
          '`call.ended` with `reason` (default `remoteEnded`), and `call.ended` goes to the webhooks with `endedBy: system`. ' +
          'Ending an ended call changes nothing and answers `ended: false` with the call, so a retry is safe.',
        requestBody: { required: false, content: json('ServerEndCall', { moderation: { summary: 'End for moderation', value: { reason: 'remoteEnded' } } }) },
        responses: {
          '200': { description: 'The call after the request', content: json('ServerEndCallResult', { ended: { summary: 'Ended now', value: { ended: true, call: SERVER_CALL } } }) },
          ...problems('invalid_request', 'not_found', 'payload_too_large', 'unsupported_media_type', ...SERVER_PROBLEMS),
        },
      },
    },
    '/v1/server/calls/{id}/participants/{userId}': {
      parameters: [callIdParam, userIdParam],
      delete: {
        operationId: 'serverRemoveParticipant',
        tags: ['Server API'],
        security: SERVER,
        summary: 'Remove a member from a group call',
        description:
          'A member in the group call or still ringing is out (`left`): its installations get `call.ended` `remoteEnded`, the members in the ' +
          'call `call.participant`; a call left with fewer than two in it ends. A member already out, or an ended call, answers ' +
          '`removed: false`, so a retry is safe (docs/server-api.md "Remove a participant").',
        responses: {
          '200': { description: 'The call after the request', content: json('ServerRemoveParticipantResult', { removed: { summary: 'Removed now', value: { removed: true, call: SERVER_CALL } } }) },
          ...problems('invalid_request', 'not_found', ...SERVER_PROBLEMS),
        },
      },
    },
    '/v1/server/users/{userId}/calls/active': {
      parameters: [userIdParam],
      get: {
        operationId: 'serverActiveCalls',
        tags: ['Server API'],
        security: SERVER,
        summary: 'A user’s calls in progress (ringing or accepted)',
        description: 'The calls of the user, as caller or callee, that have not ended.',
        responses: { '200': { description: 'The calls', content: json('ActiveCalls', { none: { summary: 'No call', value: { calls: [] } } }) }, ...problems('invalid_request', ...SERVER_PROBLEMS) },
      },
    },
    '/v1/server/users/{userId}/calls': {
      parameters: [userIdParam],
      get: {
        operationId: 'serverCallHistory',
        tags: ['Server API'],
        security: SERVER,
        summary: 'Any user’s call history, newest first',
        description: 'The same records and pages as GET /v1/calls gives the user.',
        parameters: HISTORY_PARAMS,
        responses: { ...historyResponse('One page of the user’s history'), ...problems('invalid_request', ...SERVER_PROBLEMS) },
      },
    },
    '/v1/server/users/{userId}/installations/{installationId}/sign-out': {
      parameters: [userIdParam, { name: 'installationId', in: 'path', required: true, schema: schema(s.principalId), example: 'bob-phone' }],
      post: {
        operationId: 'serverSignOut',
        tags: ['Server API'],
        security: SERVER,
        summary: 'Sign an installation out',
        description:
          'Deletes the installation’s push tokens and closes its signaling sockets on every gateway with close code 4010. ' +
          'Its session tokens stay valid until they expire: stop issuing them. Idempotent.',
        responses: {
          '200': { description: 'Done', content: json('SignOutResult', { done: { summary: 'One token removed', value: { installationId: 'bob-phone', pushTokensRemoved: 1 } } }) },
          ...problems('invalid_request', ...SERVER_PROBLEMS),
        },
      },
    },
    '/v1/server/users/{userId}': {
      parameters: [userIdParam],
      delete: {
        operationId: 'serverEraseUser',
        tags: ['Server API'],
        security: SERVER,
        summary: 'Erase a user (data-protection requests)',
        description:
          'Ends the user’s calls in progress, closes their sockets, then deletes every key of the user: push tokens, the event ' +
          'log, the call history, rate-limit counters, operation records, and each of their calls with its record and messages. ' +
          'The other parties keep their own history and events. Idempotent; `unavailable` while calls are still ending (retry).',
        responses: {
          '200': { description: 'Erased', content: json('ErasureResult', { erased: { summary: 'One call ended first', value: { userId: 'bob', callsEnded: 1, keysDeleted: 42 } } }) },
          ...problems('invalid_request', ...SERVER_PROBLEMS),
        },
      },
    },
    ...serverPolicyPaths(userIdParam, SERVER, SERVER_PROBLEMS),
    '/v1/server/webhooks/endpoints': {
      get: {
        operationId: 'serverWebhookEndpoints',
        tags: ['Server API'],
        security: SERVER,
        summary: 'The webhook endpoints, and which a 410 disabled',
        description: 'Every endpoint of WEBHOOKS (or WEBHOOKS_FILE), its event types, and `disabled` when a receiver answered 410 Gone.',
        responses: {
          '200': {
            description: 'The endpoints',
            content: json('WebhookEndpoints', {
              one: { summary: 'One endpoint', value: { endpoints: [{ id: 'billing', url: 'https://backend.example.com/hooks', events: ['call.ended'], disabled: null }] } },
            }),
          },
          ...problems(...SERVER_PROBLEMS),
        },
      },
    },
    '/v1/server/webhooks/endpoints/{id}/enable': {
      parameters: [{ name: 'id', in: 'path', required: true, schema: schema(s.opaqueId), example: 'billing' }],
      post: {
        operationId: 'serverEnableWebhookEndpoint',
        tags: ['Server API'],
        security: SERVER,
        summary: 'Enable an endpoint a 410 disabled',
        description: 'New events go to it again (each process notices within 2 s); what was skipped while it was disabled is not sent.',
        responses: {
          '200': small('Enabled', { id: 'string', wasDisabled: 'boolean' }, { id: 'billing', wasDisabled: true }),
          ...problems('invalid_request', 'not_found', ...SERVER_PROBLEMS),
        },
      },
    },
    '/v1/server/webhooks/dead-letters': {
      get: {
        operationId: 'serverDeadLetters',
        tags: ['Server API'],
        security: SERVER,
        summary: 'Webhook deliveries that exhausted their retries, newest first',
        description: 'At most WEBHOOK_DEAD_LETTERS_MAX are kept, the oldest removed first; each can be replayed.',
        parameters: PAGE_PARAMS,
        responses: { '200': { description: 'One page', content: json('DeadLettersPage', { none: { summary: 'None', value: { deadLetters: [], nextCursor: null } } }) }, ...problems('invalid_request', ...SERVER_PROBLEMS) },
      },
    },
    '/v1/server/webhooks/dead-letters/{id}/replay': {
      parameters: [{ name: 'id', in: 'path', required: true, description: 'The dead letter’s id (its webhook-id).', schema: schema(s.opaqueId), example: 'msg_2GIL1nGX7H8UphdfSCHRHc-KyHf' }],
      post: {
        operationId: 'serverReplayDeadLetter',
        tags: ['Server API'],
        security: SERVER,
        summary: 'Send a dead letter again',
        description: 'Queues the delivery again with a fresh retry schedule and the same webhook-id, and removes the dead letter.',
        responses: {
          '202': small('Queued', { id: 'string', replayed: 'boolean' }, { id: 'msg_2GIL1nGX7H8UphdfSCHRHc-KyHf', replayed: true }),
          ...problems('invalid_request', 'not_found', ...SERVER_PROBLEMS),
        },
      },
    },
  };
}

const WEBHOOK_EXAMPLES: Record<string, unknown> = {
  'call.created': { type: 'call.created', timestamp: new Date(T0).toISOString(), data: { callId: CALL_ID, callerUserId: 'alice', callerInstallationId: 'alice-phone', calleeUserId: 'bob', video: false, createdAtMs: T0, expiresAtMs: T0 + 45_000 } },
  'call.accepted': { type: 'call.accepted', timestamp: new Date(T0 + 70).toISOString(), data: { callId: CALL_ID, callerUserId: 'alice', callerInstallationId: 'alice-phone', calleeUserId: 'bob', video: false, createdAtMs: T0, acceptedAtMs: T0 + 70, answeredByInstallationId: 'bob-phone' } },
  'call.ended': {
    type: 'call.ended',
    timestamp: new Date(T0 + 45_000).toISOString(),
    data: {
      callId: CALL_ID, callerUserId: 'alice', callerInstallationId: 'alice-phone', calleeUserId: 'bob', video: false, createdAtMs: T0,
      acceptedAtMs: null, answeredByInstallationId: null, endedAtMs: T0 + 45_000, endedBy: 'system', endedByInstallationId: null,
      reasons: { caller: 'unanswered', callee: 'unanswered' }, ringingMs: 45_000, talkMs: 0, missed: true,
    },
  },
  'call.moved': { type: 'call.moved', timestamp: new Date(T0 + 90_000).toISOString(), data: { callId: CALL_ID, callerUserId: 'alice', userId: 'bob', fromInstallationId: 'bob-phone', toInstallationId: 'bob-tablet', occurredAtMs: T0 + 90_000 } },
  'call.missed': {
    type: 'call.missed',
    timestamp: new Date(T0 + 45_000).toISOString(),
    data: { callId: CALL_ID, callerUserId: 'alice', callerDisplayName: 'Alice', callerHandle: 'app:alice', userId: 'bob', video: false, invitedAtMs: T0, occurredAtMs: T0 + 45_000 },
  },
  'push.token_removed': { type: 'push.token_removed', timestamp: new Date(T0).toISOString(), data: { userId: 'bob', installationId: 'bob-phone', kind: 'iosVoip', appId: 'com.example.calls', tokenSuffix: '9f9f9f', reason: 'Unregistered', removedAtMs: T0 } },
};

/** The OpenAPI `webhooks` section: what the server POSTs to each endpoint (docs/webhooks.md). */
export function webhooksSection(): Record<string, unknown> {
  return Object.fromEntries(
    Object.keys(webhookBodies).map((type) => [
      type,
      {
        post: {
          operationId: `webhook${webhookSchemaName(type).slice('Webhook'.length)}`,
          tags: ['Server API'],
          summary: `The ${type} webhook`,
          description:
            'Signed by the Standard Webhooks scheme: headers `webhook-id` (stable per event and endpoint: deduplicate by it), ' +
            '`webhook-timestamp` and `webhook-signature` (`v1,<base64 HMAC-SHA256 of id.timestamp.body>`, two while a secret rotates). ' +
            'Answer 2xx within WEBHOOK_TIMEOUT_MS; anything else is retried on the schedule (docs/webhooks.md "Retries"); 410 disables the endpoint.',
          security: [],
          parameters: ['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((name) => ({ name, in: 'header', required: true, schema: { type: 'string' } })),
          requestBody: { required: true, content: { 'application/json': { schema: ref(webhookSchemaName(type)), example: WEBHOOK_EXAMPLES[type] } } },
          responses: { '2XX': { description: 'Received' }, '410': { description: 'Gone: disables the endpoint' } },
        },
      },
    ]),
  );
}
