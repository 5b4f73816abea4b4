import * as s from '../commands/schemas.js';
import { devicePolicyPaths, policySchemas } from './openapiPolicy.js';
import { historyOperation, serverPaths, serverSchemas, serverSecurityScheme, serverTags, webhooksSection } from './openapiServer.js';
import { ACCEPTED, CALL_ID, COMMON, CURSOR, ENDED, ENDED_EVENT, INVITED_EVENT, RINGING, T0, callCommandPath, callIdParam, forbidding, json, problems, ref, schema, snapshotExamples } from './openapiParts.js';
import { eventComponents } from './openapiEvents.js';
import { packageVersion } from '../util/packageInfo.js';
import { groupCallPaths, groupCreateExample, groupRequestSchemas } from './openapiGroup.js';

/**
 * The OpenAPI 3.1 document, generated from the same zod schemas that validate requests, with the
 * semantics docs/api.md "API" explains and an example for every body. Served at GET /v1/openapi.json
 * and checked in as docs/openapi.json (a test keeps them equal and lints it with Spectral). The WebSocket at /v1/signaling is described by docs/asyncapi.yaml instead.
 */

export function openApiDocument(): Record<string, unknown> {
  const callEventsPage = schema(s.callEventsPage);
  (callEventsPage['properties'] as Record<string, unknown>)['events'] = {
    type: 'array',
    description: 'The events for this installation, in log order.',
    items: ref('CallEvent'),
  };
  const problem = schema(s.problem);
  (problem['properties'] as Record<string, unknown>)['snapshot'] = ref('CallSnapshot');

  return {
    openapi: '3.1.0',
    info: {
      title: 'calling-backend',
      version: packageVersion(),
      description:
        'Backend for one-to-one and group voice and video calls on phones: calls with a state machine, push invitations, ' +
        'a resumable per-user event log and media credentials. The protocol (states, end reasons, events, push ' +
        'formats, limits) is described in docs/protocol.md; the WebSocket at /v1/signaling in docs/asyncapi.yaml.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
      contact: { name: 'calling-backend maintainers', url: 'https://calling-backend.dev' },
    },
    servers: [{ url: '/', description: 'The server that serves this document' }],
    security: [{ bearer: [] }],
    tags: [
      { name: 'Calls', description: 'Create, answer, end and rename calls; read a call snapshot.' },
      { name: 'Media', description: 'Short-lived TURN credentials for the parties of an accepted call.' },
      { name: 'Events', description: 'The per-user event log, read by cursor (the same events signaling sends).' },
      { name: 'Push tokens', description: 'Register and remove an installation’s VoIP or Android push token.' },
      { name: 'Call policy', description: 'Who may call the user: everyone, contacts or nobody, and a block list (docs/call-policy.md).' },
      { name: 'In-call messages', description: 'Messages between the parties of a ringing or accepted call (docs/api.md "In-call messages").' },
      ...serverTags,
    ],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'Session JWT: `sub` is the userId, `iid` the installationId (docs/api.md "Authentication").' },
        ...serverSecurityScheme,
      },
      schemas: {
        CreateCall: { description: 'A one-to-one call (`calleeUserId`) or a group call (`calleeUserIds`, docs/group-calls.md).', oneOf: [ref('CreateOneToOneCall'), ref('CreateGroupCall')] },
        CreateOneToOneCall: forbidding(schema(s.oneToOneCallBody, 'input'), 'calleeUserIds', 'title'),
        CreateGroupCall: forbidding(schema(s.groupCallBody, 'input'), 'calleeUserId'),
        AnswerCall: schema(s.answerCallBody, 'input'),
        MoveCall: schema(s.moveCallBody, 'input'),
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
        CallEventsPage: callEventsPage,
        ...eventComponents(),
        ...groupRequestSchemas,
        Problem: problem,
        ...serverSchemas(),
        ...policySchemas,
      },
    },
    paths: {
      '/v1/installations/{id}/push-tokens/{kind}': {
        parameters: [
          {
            name: 'id',
            in: 'path',
            required: true,
            schema: schema(s.principalId),
            description: "The installationId; must be the session token's own installation (`iid`).",
            example: 'alice-phone',
          },
          { name: 'kind', in: 'path', required: true, schema: schema(s.pushTokenKind), description: '`iosVoip`, `iosAlert` or `androidPush`.', example: 'iosVoip' },
        ],
        put: {
          operationId: 'putPushToken',
          tags: ['Push tokens'],
          summary: 'Register this installation’s push token',
          description:
            'Saves (or replaces) the push token invitations are sent to. An `iosVoip` token is the APNs VoIP device token ' +
            'as 64 or more hex characters, and `iosEnvironment` is required; `iosAlert` is the app\'s regular APNs device token ' +
            '(same form, `iosEnvironment` required), used only for missed-call alerts (docs/protocol.md "Missed-call alerts"); ' +
            '`androidPush` is an FCM registration token and refuses `iosEnvironment`. The token is never echoed back: the response names its last characters.',
          requestBody: {
            required: true,
            content: json('PushTokenRequest', {
              ios: { summary: 'An iOS VoIP token', value: { token: '9f'.repeat(32), appId: 'com.example.calls', iosEnvironment: 'production' } },
              android: { summary: 'An Android FCM token', value: { token: 'fcm-registration-token-0123456789', appId: 'com.example.calls' } },
            }),
          },
          responses: {
            '200': {
              description: 'The saved registration',
              content: json('PushTokenRegistration', {
                ios: {
                  summary: 'iOS registration',
                  value: { installationId: 'alice-phone', kind: 'iosVoip', appId: 'com.example.calls', iosEnvironment: 'production', tokenSuffix: '9f9f9f', updatedAtMs: T0 },
                },
              }),
            },
            ...problems('invalid_request', 'forbidden', 'payload_too_large', 'unsupported_media_type', ...COMMON),
          },
        },
        delete: {
          operationId: 'deletePushToken',
          tags: ['Push tokens'],
          summary: 'Remove this installation’s push token (sign-out)',
          description: 'Removes the registration; the installation gets no more push invitations. Removing a token that is not there succeeds too.',
          responses: { '204': { description: 'Removed (or was not there)' }, ...problems('invalid_request', 'forbidden', ...COMMON) },
        },
      },
      '/v1/calls': {
        get: historyOperation,
        post: {
          operationId: 'createCall',
          tags: ['Calls'],
          summary: 'Create a ringing call',
          description:
            'Starts a call from the session user to `calleeUserId`. The invitations to every callee installation ' +
            '(push and signaling) are queued in the same transaction. The call rings until answered, ended or ' +
            'expired (`expiresAtMs`). A retry with the same `operationId` and body returns the original response; ' +
            'a `callId` is never reused (`call_exists`). When the callee is in an accepted call (and `CALL_WAITING` is off) ' +
            'the call is created already ended as `busy`: nothing rings and only the caller is told. With `calleeUserIds` ' +
            'instead, a group call rings each of them (docs/group-calls.md); a `title` is a group call\'s only, refused on a one-to-one create.',
          requestBody: {
            required: true,
            content: json('CreateCall', {
              audio: { summary: 'An audio call', value: { callId: CALL_ID, calleeUserId: 'bob', operationId: 'op-create-1', video: false } },
              ...groupCreateExample,
            }),
          },
          responses: {
            '201': { description: 'The snapshot of the new call (a replay returns the original)', content: json('CallSnapshot', snapshotExamples('Ringing', RINGING)) },
            ...problems('invalid_request', 'idempotency_conflict', 'call_exists', 'payload_too_large', 'unsupported_media_type', ...COMMON),
          },
        },
      },
      '/v1/calls/{id}': {
        parameters: [callIdParam],
        get: {
          operationId: 'getCall',
          tags: ['Calls'],
          summary: 'Read a call',
          description:
            'The current snapshot as the session user’s side sees it, ended calls included (kept `CALL_RETENTION_MS`). ' +
            'Only the caller and the callee may read a call; anyone else gets `not_found`.',
          responses: {
            '200': { description: 'The snapshot', content: json('CallSnapshot', snapshotExamples('Accepted', ACCEPTED)) },
            ...problems('invalid_request', 'not_found', ...COMMON),
          },
        },
      },
      '/v1/calls/{id}/answer': callCommandPath(
        'answerCall',
        'Answer a ringing call',
        'The first answer while the call rings wins, atomically; the caller is told `call.accepted` and the ' +
          'callee’s other installations `call.ended` with `answeredElsewhere`. A later answer from another ' +
          'installation gets `answer_conflict` with the winner’s snapshot; an `expectedRevision` that does not ' +
          'match gets `revision_conflict`. Only the callee answers.',
        ['AnswerCall', { answer: { summary: 'Answer from the phone', value: { operationId: 'op-answer-1', installationId: 'bob-phone', expectedRevision: '1' } } }],
        ['The winner’s snapshot', 'Accepted', ACCEPTED],
        ['invalid_request', 'forbidden', 'not_found', 'answer_conflict', 'revision_conflict', 'idempotency_conflict', ...COMMON],
      ),
      '/v1/calls/{id}/end': callCommandPath(
        'endCall',
        'End a call',
        'Hang up, cancel, decline, or report a local failure, with the reason as this side saw it. The other side ' +
          'is told the reason from its own side (docs/protocol.md "End reasons"). The echoes `remoteEnded`, ' +
          '`callerCancelled`, `answeredElsewhere` and `movedElsewhere` are accepted and change nothing. Ending an ended call returns ' +
          'its terminal snapshot.',
        ['EndCall', { hangUp: { summary: 'Hang up', value: { operationId: 'op-end-1', reason: 'localHangup' } } }],
        ['The terminal (or current) snapshot', 'Ended', ENDED],
        ['invalid_request', 'not_found', 'idempotency_conflict', ...COMMON],
      ),
      '/v1/calls/{id}/move': callCommandPath(
        'moveCall',
        'Move an accepted call to this installation',
        'Another installation of a user in an accepted call claims it (docs/protocol.md "Moving a call"): the call ' +
          'keeps its callId and stays accepted, and goes on from this installation. The installation it leaves gets ' +
          '`call.ended` with `movedElsewhere`; everyone else in the call gets `call.moved` and needs a new media ' +
          'session with it (new ICE, or the SFU room again). `expectedRevision` is required: of two installations ' +
          'that move at once, the second gets `revision_conflict`. A move of a call that is not accepted, or by a ' +
          'user not in it, gets `not_in_call`; a move to the installation already in the call changes nothing.',
        ['MoveCall', { move: { summary: 'Move the call to the tablet', value: { operationId: 'op-move-1', installationId: 'bob-tablet', expectedRevision: '2' } } }],
        ['The moved call’s snapshot', 'Moved', { ...ACCEPTED, revision: '3', answeredByInstallationId: 'bob-tablet' }],
        ['invalid_request', 'forbidden', 'not_found', 'revision_conflict', 'not_in_call', 'idempotency_conflict', ...COMMON],
      ),
      '/v1/calls/{id}/rename': callCommandPath(
        'renameCall',
        'Change the caller’s displayed name',
        'The caller changes the name shown on a ringing or accepted call; callee installations that still show ' +
          'the call get `call.renamed`. The name is cut to 256 UTF-8 bytes. Renaming an ended call changes nothing. ' +
          'Limited per user (`RATE_RENAMES_PER_MIN`) and per call (`RENAMES_PER_CALL`).',
        ['RenameCall', { rename: { summary: 'A new name', value: { operationId: 'op-rename-1', displayName: 'Alice (work)' } } }],
        ['The snapshot (unchanged for an ended call)', 'Renamed', { ...ACCEPTED, revision: '3', caller: { ...ACCEPTED.caller, displayName: 'Alice (work)' } }],
        ['invalid_request', 'forbidden', 'not_found', 'idempotency_conflict', ...COMMON],
      ),
      ...groupCallPaths(),
      '/v1/calls/{id}/messages': {
        parameters: [callIdParam],
        post: {
          operationId: 'sendCallMessage',
          tags: ['In-call messages'],
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
          tags: ['In-call messages'],
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
          tags: ['Media'],
          summary: 'Get TURN credentials for an accepted call',
          description:
            'Short-lived ICE servers for the caller’s installation and the answering installation of an accepted call ' +
            '(TURN REST credentials: username `<expiry seconds>:<userId>`, HMAC-SHA1 credential). A server without ' +
            '`TURN_URLS` answers an empty `iceServers` list. Another callee installation gets `answer_conflict`. With ' +
            '`MEDIA_MODE=sfu` the reply also has `sfu`: the call\'s room on the SFU and a credential for this installation ' +
            'and this room only, until `expiresAtMs`; an SFU that is down or refuses answers `sfu_unavailable` and the call goes on.',
          requestBody: { required: false, content: json('MediaSessionRequest', { empty: { summary: 'No options', value: {} } }) },
          responses: {
            '200': {
              description: 'ICE servers and their expiry',
              content: json('MediaSession', {
                turn: {
                  summary: 'With TURN_URLS set',
                  value: {
                    iceServers: [
                      { urls: ['stun:stun.example.org:3478'] },
                      { urls: ['turn:turn.example.org:3478?transport=udp'], username: '1795237318:alice', credential: 'q0b3Yx1xW0c2l2o4WqW0f6b4s3A=' },
                    ],
                    expiresAtMs: 1795237318000,
                  },
                },
                noTurn: { summary: 'Without TURN_URLS', value: { iceServers: [], expiresAtMs: 1795237318000 } },
                sfu: {
                  summary: 'With MEDIA_MODE=sfu and SFU=janus',
                  value: {
                    iceServers: [{ urls: ['turn:turn.example.org:3478?transport=udp'], username: '1795237318:alice', credential: 'q0b3Yx1xW0c2l2o4WqW0f6b4s3A=' }],
                    expiresAtMs: 1795237318000,
                    sfu: { kind: 'janus', url: 'wss://janus1.example.org/', room: 182735981127733, token: '1795237318,janus,janus.plugin.videoroom,Qm9i0vWc3rE1l2Kx8uYtZa:Z2l2ZW4gYnkgdGhlIHNlcnZlcg==' },
                  },
                },
              }),
            },
            ...problems('invalid_request', 'forbidden', 'not_found', 'answer_conflict', 'sfu_unavailable', ...COMMON),
          },
        },
      },
      '/v1/call-events': {
        get: {
          operationId: 'listCallEvents',
          tags: ['Events'],
          summary: 'Read the event log after a cursor',
          description:
            'The events for this installation after `cursor`, the cursor to continue from, and `hasMore`. Without a ' +
            'cursor: no history, `nextCursor` is the head of the log. Keep reading while `hasMore` is true: a page can ' +
            'hold fewer events than `limit`, even none, and still have more after it. A cursor older than the log’s ' +
            'retention, or from before a reset, gets `gap` (events were lost: refetch the calls you know) and the head ' +
            'cursor. Signaling sends the same events live.',
          parameters: [
            { name: 'cursor', in: 'query', required: false, description: 'A cursor from an earlier page or signaling frame.', schema: { type: 'string' }, example: CURSOR },
            {
              name: 'limit',
              in: 'query',
              required: false,
              description:
                'How many entries of the user’s event log one page reads, 1 to 500 (default 100). Entries meant for the ' +
                'user’s other installations are read and skipped, so a page holds at most `limit` events, possibly none.',
              schema: { type: 'integer', minimum: 1, maximum: 500, default: 100 },
              example: 100,
            },
          ],
          responses: {
            '200': {
              description: 'One page of events, or a gap',
              content: json('CallEventsPage', {
                events: { summary: 'Events, more to read', value: { events: [INVITED_EVENT, ENDED_EVENT], nextCursor: CURSOR, hasMore: true } },
                end: { summary: 'Nothing more for now', value: { events: [], nextCursor: CURSOR, hasMore: false } },
                gap: { summary: 'Events were lost', value: { gap: { reason: 'trimmed' }, events: [], nextCursor: CURSOR, hasMore: false } },
              }),
            },
            ...problems('invalid_request', ...COMMON),
          },
        },
      },
      ...devicePolicyPaths(),
      ...serverPaths(),
    },
    webhooks: webhooksSection(),
  };
}
