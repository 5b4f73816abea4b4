import { z } from 'zod';
import * as s from './schemas.js';
import { errorCatalogue } from './errors.js';

/**
 * The OpenAPI 3.1 document, generated from the same zod schemas that validate requests.
 * Served at GET /v1/openapi.json and checked in as docs/openapi.json (a test keeps them equal).
 */

function schema(t: z.ZodType, io: 'input' | 'output' = 'output'): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(t, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: string) => ({ 'application/json': { schema: ref(name) } });
const problemContent = { 'application/problem+json': { schema: ref('Problem') } };

function problems(...codes: (keyof typeof errorCatalogue)[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const code of codes) {
    const status = String(errorCatalogue[code].status);
    const prev = out[status] as { description: string } | undefined;
    out[status] = { description: prev ? `${prev.description}, ${code}` : code, content: problemContent };
  }
  return out;
}

const COMMON = ['unauthorized', 'rate_limited', 'internal', 'unavailable'] as const;
const callIdParam = { name: 'id', in: 'path', required: true, schema: schema(s.opaqueId) };

export function openApiDocument(): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: {
      title: 'calling-backend',
      version: '1.0.0',
      description: 'Backend for one-to-one voice and video calls on phones. See README.md and docs/signaling.md.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [{ url: '/' }],
    tags: [{ name: 'in-call messages', description: 'Messages between the parties of a ringing or accepted call (README "In-call messages")' }],
    security: [{ bearer: [] }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      schemas: {
        CreateCall: schema(s.createCallBody, 'input'),
        AnswerCall: schema(s.answerCallBody, 'input'),
        EndCall: schema(s.endCallBody, 'input'),
        RenameCall: schema(s.renameCallBody, 'input'),
        MediaSessionRequest: schema(s.mediaSessionBody, 'input'),
        SendMessage: schema(s.sendMessageBody, 'input'),
        MessageSent: schema(s.messageSent),
        CallMessagesPage: schema(s.callMessagesPage),
        PushTokenRequest: schema(s.pushTokenBody, 'input'),
        PushTokenRegistration: schema(s.pushTokenRegistration),
        CallSnapshot: schema(s.callSnapshot),
        MediaSession: schema(s.mediaSession),
        CallEventsPage: schema(s.callEventsPage),
        Problem: schema(s.problem),
      },
    },
    paths: {
      '/v1/installations/{id}/push-tokens/{kind}': {
        parameters: [
          { name: 'id', in: 'path', required: true, schema: schema(s.principalId), description: "must be the session's installation" },
          { name: 'kind', in: 'path', required: true, schema: schema(s.pushTokenKind) },
        ],
        put: {
          operationId: 'putPushToken',
          summary: 'Register this installation’s push token',
          requestBody: { required: true, content: json('PushTokenRequest') },
          responses: {
            '200': { description: 'saved registration', content: json('PushTokenRegistration') },
            ...problems('invalid_request', 'forbidden', 'payload_too_large', 'unsupported_media_type', ...COMMON),
          },
        },
        delete: {
          operationId: 'deletePushToken',
          summary: 'Unregister (sign-out)',
          responses: { '204': { description: 'removed' }, ...problems('invalid_request', 'forbidden', ...COMMON) },
        },
      },
      '/v1/calls': {
        post: {
          operationId: 'createCall',
          summary: 'Create a ringing call; invitations are queued in the same transaction',
          requestBody: { required: true, content: json('CreateCall') },
          responses: {
            '201': { description: 'call snapshot (a replay returns the original)', content: json('CallSnapshot') },
            ...problems('invalid_request', 'idempotency_conflict', 'call_exists', 'payload_too_large', 'unsupported_media_type', ...COMMON),
          },
        },
      },
      '/v1/calls/{id}': {
        parameters: [callIdParam],
        get: {
          operationId: 'getCall',
          summary: 'Current snapshot, ended calls included',
          responses: { '200': { description: 'snapshot', content: json('CallSnapshot') }, ...problems('invalid_request', 'not_found', ...COMMON) },
        },
      },
      '/v1/calls/{id}/answer': {
        parameters: [callIdParam],
        post: {
          operationId: 'answerCall',
          summary: 'Answer; the first answering installation wins',
          requestBody: { required: true, content: json('AnswerCall') },
          responses: {
            '200': { description: 'winner snapshot', content: json('CallSnapshot') },
            ...problems('invalid_request', 'forbidden', 'not_found', 'answer_conflict', 'revision_conflict', 'idempotency_conflict', ...COMMON),
          },
        },
      },
      '/v1/calls/{id}/end': {
        parameters: [callIdParam],
        post: {
          operationId: 'endCall',
          summary: 'Hang up, cancel, decline or report a local failure',
          requestBody: { required: true, content: json('EndCall') },
          responses: {
            '200': { description: 'terminal (or current) snapshot', content: json('CallSnapshot') },
            ...problems('invalid_request', 'not_found', 'idempotency_conflict', ...COMMON),
          },
        },
      },
      '/v1/calls/{id}/rename': {
        parameters: [callIdParam],
        post: {
          operationId: 'renameCall',
          summary: 'The caller changes the name shown on a ringing or accepted call (call.renamed)',
          requestBody: { required: true, content: json('RenameCall') },
          responses: {
            '200': { description: 'snapshot (unchanged for an ended call)', content: json('CallSnapshot') },
            ...problems('invalid_request', 'forbidden', 'not_found', 'idempotency_conflict', ...COMMON),
          },
        },
      },
      '/v1/calls/{id}/messages': {
        parameters: [callIdParam],
        post: {
          operationId: 'sendCallMessage',
          tags: ['in-call messages'],
          summary: 'Send an in-call message (SDP, ICE candidates) to the other party',
          description:
            'Delivers `payload` unchanged as a `call.message` signaling frame (docs/schemas/call.message.json) to the other ' +
            "party's installation in the call: before the answer the caller's messages go to every ringing callee " +
            'installation, after it only to the answering one; the callee\'s go to the caller\'s calling installation. ' +
            'Only those installations may send, only while the call rings or is accepted (`call_not_active` after it ends). ' +
            'In order per sender (`seq`), at least once (deduplicate by `eventId`), idempotent by `operationId`, ' +
            'rate-limited per call and sender (RATE_CALL_MESSAGES_PER_10S). Messages are kept in the call, not in the event log.',
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: ref('SendMessage'),
                example: { operationId: 'msg-7f3c2a', payload: { kind: 'offer', sdp: 'v=0\r\no=- 4611731400430051336 2 IN IP4 127.0.0.1\r\n…' } },
              },
            },
          },
          responses: {
            '200': {
              description: 'stored and queued for delivery (a replay returns the original)',
              content: {
                'application/json': {
                  schema: ref('MessageSent'),
                  example: { eventId: '0f8e1c8a-3c0d-4c43-9a53-2d8f0b1c9e11', callId: '6b1f…', seq: 1, occurredAtMs: 1795236718120 },
                },
              },
            },
            ...problems('invalid_request', 'forbidden', 'not_found', 'idempotency_conflict', 'call_not_active', 'payload_too_large', 'unsupported_media_type', ...COMMON),
          },
        },
        get: {
          operationId: 'listCallMessages',
          tags: ['in-call messages'],
          summary: 'The call\'s messages for this installation (recovery after a reconnect)',
          description:
            'The `call.message` events sent to this installation with a `seq` above `afterSeq`, in send order. A device that ' +
            "reconnects during a call calls it with the highest `seq` it has (messages are not in the event log). The call keeps " +
            'its last 256 messages, for an hour after the last one.',
          parameters: [{ name: 'afterSeq', in: 'query', required: false, schema: { type: 'integer', minimum: 0, default: 0 } }],
          responses: {
            '200': {
              description: 'messages',
              content: {
                'application/json': {
                  schema: ref('CallMessagesPage'),
                  example: {
                    messages: [
                      {
                        schemaVersion: 1,
                        eventId: '0f8e1c8a-3c0d-4c43-9a53-2d8f0b1c9e11',
                        type: 'call.message',
                        callId: '6b1f…',
                        occurredAtMs: 1795236718120,
                        fromInstallationId: 'alice-phone',
                        seq: 1,
                        payload: { kind: 'offer', sdp: 'v=0…' },
                      },
                    ],
                  },
                },
              },
            },
            ...problems('invalid_request', 'not_found', ...COMMON),
          },
        },
      },
      '/v1/calls/{id}/media-session': {
        parameters: [callIdParam],
        post: {
          operationId: 'createMediaSession',
          summary: 'Short-lived TURN credentials for a participant of an accepted call',
          requestBody: { required: false, content: json('MediaSessionRequest') },
          responses: {
            '200': { description: 'credentials', content: json('MediaSession') },
            ...problems('invalid_request', 'forbidden', 'not_found', 'answer_conflict', ...COMMON),
          },
        },
      },
      '/v1/call-events': {
        get: {
          operationId: 'listCallEvents',
          summary: 'Events after a cursor, or an explicit gap',
          parameters: [
            { name: 'cursor', in: 'query', required: false, schema: { type: 'string' } },
            { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 500, default: 100 } },
          ],
          responses: { '200': { description: 'events page', content: json('CallEventsPage') }, ...problems('invalid_request', ...COMMON) },
        },
      },
      '/v1/signaling': {
        get: {
          operationId: 'signaling',
          summary: 'WebSocket upgrade (see docs/signaling.md)',
          parameters: [
            { name: 'cursor', in: 'query', required: false, schema: { type: 'string' } },
            { name: 'access_token', in: 'query', required: false, schema: { type: 'string' } },
          ],
          responses: { '101': { description: 'switching protocols' }, ...problems('invalid_request', 'unauthorized') },
        },
      },
      '/v1/openapi.json': {
        get: { operationId: 'openapi', security: [], summary: 'This document', responses: { '200': { description: 'OpenAPI 3.1' } } },
      },
      '/healthz': { get: { operationId: 'healthz', security: [], summary: 'Liveness', responses: { '200': { description: 'alive' } } } },
      '/readyz': {
        get: { operationId: 'readyz', security: [], summary: 'Readiness', responses: { '200': { description: 'ready' }, '503': { description: 'not ready' } } },
      },
      '/metrics': { get: { operationId: 'metrics', security: [], summary: 'Prometheus metrics', responses: { '200': { description: 'text exposition' } } } },
    },
  };
}
