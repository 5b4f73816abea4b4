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
    security: [{ bearer: [] }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      schemas: {
        CreateCall: schema(s.createCallBody, 'input'),
        AnswerCall: schema(s.answerCallBody, 'input'),
        EndCall: schema(s.endCallBody, 'input'),
        RenameCall: schema(s.renameCallBody, 'input'),
        MediaSessionRequest: schema(s.mediaSessionBody, 'input'),
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
    },
  };
}
