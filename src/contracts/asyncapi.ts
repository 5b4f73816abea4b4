import { packageVersion } from '../util/packageInfo.js';
import { CLOSE, SUBPROTOCOL_JSON, SUBPROTOCOL_MSGPACK } from './signaling.js';
import { CALL_COMMANDS } from '../commands/callCommands.js';
import type { CallCommand } from '../commands/command.js';
import { opaqueId } from '../commands/schemas.js';
import { schema } from './openapiParts.js';
import { SIGNAL_KINDS } from '../calls/presence.js';
import { SIGNAL_CUSTOM_MAX_BYTES, SIGNAL_REACTION_MAX_CHARS } from '../config/signalLimits.js';

/**
 * The AsyncAPI 3.0 document of /v1/signaling (docs/signaling.md in machine-readable form): the
 * frames each way, the close codes, and the events, whose payloads are $refs to the JSON Schemas
 * in docs/schemas/. Checked in as docs/asyncapi.json; a test parses it with @asyncapi/parser.
 */

const eventSchemas = ['call.invited', 'call.accepted', 'call.ended', 'call.renamed', 'call.ringing', 'call.participant', 'call.moved', 'call.missed'].map((name) => ({ $ref: `./schemas/${name}.json` }));

/** What each command frame does; its fields are its HTTP route's body (docs/openapi.json) plus `callId`. */
const COMMAND_SUMMARIES: Record<CallCommand['name'], { summary: string; example: Record<string, unknown> }> = {
  answer: { summary: 'Answer the call (POST /v1/calls/{id}/answer): the first answering installation wins.', example: { installationId: 'bob-phone' } },
  end: { summary: 'Hang up, cancel or decline (POST /v1/calls/{id}/end).', example: { reason: 'localHangup' } },
  move: { summary: 'Move an accepted call to this installation of a member in it (POST /v1/calls/{id}/move).', example: { installationId: 'bob-tablet', expectedRevision: '3' } },
  rename: { summary: 'The caller changes the name shown (POST /v1/calls/{id}/rename).', example: { displayName: 'Alice (work)' } },
  message: { summary: 'An in-call message, e.g. SDP or an ICE candidate (POST /v1/calls/{id}/messages).', example: { payload: { kind: 'candidate', candidate: 'candidate:1 1 udp 2122260223 192.0.2.7 54400 typ host' } } },
  invite: { summary: 'A participant rings more users into a group call (POST /v1/calls/{id}/invite).', example: { userIds: ['dave'] } },
  ringing: { summary: 'A ringing receipt: this installation shows the incoming call (POST /v1/calls/{id}/ringing).', example: { via: 'socket' } },
};

/** A command frame: its route's body (as JSON Schema from the same zod schema) plus type and callId. */
function commandFrame(name: string) {
  const command = CALL_COMMANDS.get(name)!;
  const body = schema(command.body, 'input') as { properties: Record<string, unknown>; required?: string[] };
  const { summary, example } = COMMAND_SUMMARIES[name as CallCommand['name']];
  return frame(name, `Command: ${name}`, `${summary} Answered by one \`reply\` frame with its operationId.`, { callId: schema(opaqueId), ...body.properties }, ['callId', ...(body.required ?? [])], {
    type: name,
    callId: '3f1c9a52-7d1e-4f0e-9b8a-2c6d5e4f7a10',
    operationId: '9b2f6c1e-5a3d-4e8f-a1b2-c3d4e5f6a7b8',
    ...example,
  });
}

/** Close codes and what a client does about each (docs/signaling.md "Close codes"). */
export const CLOSE_CODES: readonly { code: number; meaning: string; action: string }[] = [
  { code: CLOSE.normal, meaning: 'normal close', action: 'nothing' },
  { code: CLOSE.goingAway, meaning: 'server shutting down', action: 'reconnect (any gateway) with the last cursor' },
  { code: CLOSE.tooBig, meaning: 'client frame larger than WS_MAX_MESSAGE_BYTES', action: 'fix the client' },
  { code: 1011, meaning: 'temporary server failure', action: 'reconnect with the last cursor, with backoff' },
  { code: CLOSE.tryAgainLater, meaning: 'the gateway is admitting new sockets at its limit (WS_ADMISSIONS_PER_S); the reason says when to come back: `server busy; retry after <ms> ms`', action: 'reconnect with the last cursor after that time' },
  { code: CLOSE.badMessage, meaning: 'invalid client frame', action: 'fix the client' },
  { code: CLOSE.tokenExpired, meaning: 'session token expired', action: 'get a fresh token, reconnect with the last cursor' },
  { code: CLOSE.slowConsumer, meaning: 'slow consumer (send buffer full)', action: 'reconnect with the last cursor' },
  { code: CLOSE.signedOut, meaning: "the app's backend signed this installation out (docs/server-api.md)", action: 'do not reconnect with this session; sign in again' },
  { code: CLOSE.rateLimited, meaning: 'too many client messages', action: 'reconnect after a pause' },
];

const cursor = { type: 'string', description: 'Opaque; store it once the frame is processed and reconnect with it.', examples: ['mhx2k9c1a7f3qz_1795236718009-0'] };

function frame(name: string, title: string, summary: string, properties: Record<string, unknown>, required: string[], example: Record<string, unknown>) {
  return {
    name,
    title,
    summary,
    contentType: 'application/json',
    payload: { type: 'object', required: ['type', ...required], properties: { type: { type: 'string', const: name }, ...properties } },
    examples: [{ name: `${name}Example`, payload: example }],
  };
}

export function asyncApiDocument(): Record<string, unknown> {
  const closeTable = CLOSE_CODES.map((c) => `| ${c.code} | ${c.meaning} | ${c.action} |`).join('\n');
  return {
    asyncapi: '3.0.0',
    info: {
      title: 'calling-backend signaling',
      version: packageVersion(),
      description:
        'One WebSocket per installation delivers its call events: first the replay after the cursor it connects ' +
        'with, then `synced`, then live events. Delivery is at least once: deduplicate by `eventId`, and per call ' +
        'order by `revision`. The call commands (answer, end, rename, message) may be sent as frames, each answered by ' +
        'one `reply` frame with the outcome of its HTTP route (docs/openapi.json). Protocol: docs/protocol.md and ' +
        'docs/signaling.md.',
      license: { name: 'Apache-2.0', url: 'https://www.apache.org/licenses/LICENSE-2.0' },
    },
    defaultContentType: 'application/json',
    servers: {
      production: {
        host: 'calls.example.com',
        protocol: 'wss',
        description: 'Your deployment. The token is checked before the upgrade: 401 (problem+json) when missing or invalid, 400 for a malformed cursor, 429 over WS_MAX_SOCKETS_PER_USER, 403 for an origin not in CORS_ORIGINS when WS_CHECK_ORIGIN is on.',
        security: [{ $ref: '#/components/securitySchemes/bearer' }, { $ref: '#/components/securitySchemes/accessToken' }],
      },
    },
    channels: {
      signaling: {
        address: '/v1/signaling',
        title: 'Signaling',
        description:
          `Subprotocols: \`${SUBPROTOCOL_JSON}\` (text frames, the default) or \`${SUBPROTOCOL_MSGPACK}\` (the same frames ` +
          `as msgpack binary frames).\n\nClose codes:\n\n| code | meaning | what the client does |\n|---|---|---|\n${closeTable}`,
        messages: {
          event: { $ref: '#/components/messages/event' },
          gap: { $ref: '#/components/messages/gap' },
          synced: { $ref: '#/components/messages/synced' },
          message: { $ref: '#/components/messages/message' },
          signal: { $ref: '#/components/messages/signal' },
          signalSend: { $ref: '#/components/messages/signalSend' },
          reply: { $ref: '#/components/messages/reply' },
          pong: { $ref: '#/components/messages/pong' },
          error: { $ref: '#/components/messages/error' },
          ping: { $ref: '#/components/messages/ping' },
          ...Object.fromEntries([...CALL_COMMANDS.keys()].map((c) => [`${c}Command`, { $ref: `#/components/messages/${c}Command` }])),
        },
        bindings: {
          ws: {
            method: 'GET',
            query: {
              type: 'object',
              properties: {
                cursor: { type: 'string', description: 'Resume after this cursor; without it delivery starts at the head (no history).' },
                access_token: { type: 'string', description: 'The session JWT, for browsers (which cannot send headers on a WebSocket).' },
              },
            },
            headers: {
              type: 'object',
              properties: {
                Authorization: { type: 'string', description: '`Bearer <session JWT>`' },
                'Sec-WebSocket-Protocol': { type: 'string', enum: [SUBPROTOCOL_JSON, SUBPROTOCOL_MSGPACK] },
              },
            },
          },
        },
        'x-close-codes': CLOSE_CODES,
      },
    },
    operations: {
      receiveFrames: {
        action: 'receive',
        channel: { $ref: '#/channels/signaling' },
        title: 'Receive events',
        summary: 'What the server sends: events, gaps, the end of the replay, in-call messages, replies to commands, pongs and errors.',
        messages: ['event', 'gap', 'synced', 'message', 'signal', 'reply', 'pong', 'error'].map((m) => ({ $ref: `#/channels/signaling/messages/${m}` })),
      },
      sendPing: {
        action: 'send',
        channel: { $ref: '#/channels/signaling' },
        title: 'Keepalive',
        summary: `At most RATE_WS_MESSAGES_PER_10S client frames (of any type) per 10 s, else close ${CLOSE.rateLimited}.`,
        messages: [{ $ref: '#/channels/signaling/messages/ping' }],
      },
      sendSignals: {
        action: 'send',
        channel: { $ref: '#/channels/signaling' },
        title: 'Live signals',
        summary:
          `A joined member's live state (muted, speaking, handRaised, video), reactions and small custom values for the other joined members: not stored, at most once, in order per sender; no reply when sent, an error frame (signal_refused) when refused; over RATE_CALL_SIGNALS_PER_S per call each is dropped (docs/signaling.md "Live signals").`,
        messages: [{ $ref: '#/channels/signaling/messages/signalSend' }],
      },
      sendCommands: {
        action: 'send',
        channel: { $ref: '#/channels/signaling' },
        title: 'Call commands',
        summary: 'The HTTP routes answer, end, rename and messages as frames: same checks, limits and operationId idempotency; a retry may switch transport.',
        messages: [...CALL_COMMANDS.keys()].map((c) => ({ $ref: `#/channels/signaling/messages/${c}Command` })),
        reply: { channel: { $ref: '#/channels/signaling' }, messages: [{ $ref: '#/channels/signaling/messages/reply' }] },
      },
    },
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'Authorization header on the upgrade request (native apps, servers).' },
        accessToken: { type: 'httpApiKey', name: 'access_token', in: 'query', description: 'The session JWT as a query parameter (browsers).' },
      },
      messages: {
        event: frame(
          'event',
          'Event',
          'One call event for this installation; `event` is call.invited, call.accepted, call.ended or call.renamed. ' +
            'Without `cursor`: an early copy, sent as the change is made; the same event follows from the log with its cursor (docs/signaling.md "Early events").',
          { cursor, event: { oneOf: eventSchemas } },
          ['event'],
          {
            type: 'event',
            cursor: 'mhx2k9c1a7f3qz_1795236718009-0',
            event: {
              schemaVersion: 1,
              type: 'call.invited',
              callId: '3f1c9a52-7d1e-4f0e-9b8a-2c6d5e4f7a10',
              displayName: 'Alice',
              handle: 'app:alice',
              eventId: '3f1c9a52-7d1e-4f0e-9b8a-2c6d5e4f7a10:1:invited',
              revision: '1',
              issuedAtMs: 1795236718009,
              expiresAtMs: 1795236763009,
              video: false,
            },
          },
        ),
        gap: frame(
          'gap',
          'Gap',
          'Events after your cursor are gone (trimmed by retention, or the log was reset): refetch the calls you know; delivery continues from `cursor`.',
          { reason: { type: 'string', enum: ['trimmed', 'reset'] }, cursor },
          ['reason', 'cursor'],
          { type: 'gap', reason: 'trimmed', cursor: 'mhx2k9c1a7f3qz_1795236718009-0' },
        ),
        synced: frame(
          'synced',
          'Synced',
          'The replay is complete; what follows is live. `reconnectWindowMs`, when present: if this socket drops without a close frame (the gateway crashed), spread the first reconnect uniformly over this many ms rather than the usual first backoff: the time the surviving gateways take to admit this gateway\'s sockets beyond the first second\'s worth (docs/signaling.md "A reconnect storm").',
          { cursor, reconnectWindowMs: { type: 'integer', minimum: 1 } },
          ['cursor'],
          {
          type: 'synced',
          cursor: 'mhx2k9c1a7f3qz_1795236718009-0',
          },
        ),
        message: frame(
          'message',
          'In-call message',
          'A call.message from the other party (not in the event log, no cursor): apply it to its call by callId; drop an eventId you have.',
          { event: { $ref: './schemas/call.message.json' } },
          ['event'],
          {
            type: 'message',
            event: {
              schemaVersion: 1,
              eventId: '0f8e1c8a-2b7d-4c1e-9f3a-5d6e7f8a9b0c',
              type: 'call.message',
              callId: '3f1c9a52-7d1e-4f0e-9b8a-2c6d5e4f7a10',
              occurredAtMs: 1795236718120,
              fromInstallationId: 'alice-phone',
              seq: 1,
              payload: { kind: 'offer', sdp: 'v=0' },
            },
          },
        ),
        signal: frame(
          'signal',
          'Live signal',
          'Another joined member\'s live signal (not in the event log, no cursor, never replayed): the state kinds update that member\'s entry of the call\'s presence.',
          { signal: signalBody(true) },
          ['signal'],
          { type: 'signal', signal: { callId: '3f1c9a52-7d1e-4f0e-9b8a-2c6d5e4f7a10', userId: 'alice', kind: 'muted', value: true, atMs: 1795236718120 } },
        ),
        signalSend: frame(
          'signal',
          'Send a live signal',
          `For the other members in the call; you must be joined to it from this installation. \`custom\`: any JSON value up to ${SIGNAL_CUSTOM_MAX_BYTES} bytes.`,
          signalBody(false).properties,
          ['callId', 'kind', 'value'],
          { type: 'signal', callId: '3f1c9a52-7d1e-4f0e-9b8a-2c6d5e4f7a10', kind: 'handRaised', value: true },
        ),
        reply: frame(
          'reply',
          'Reply',
          "The outcome of a command frame: its HTTP route's status and body (the call's snapshot, the message's eventId and seq, or a problem whose `snapshot` is the winner's for a lost answer).",
          {
            operationId: { type: 'string', description: "The command's operationId (absent when the frame had none)." },
            status: { type: 'integer', description: 'The HTTP status the route would have answered.' },
            body: { type: 'object', description: 'The body the route would have answered (docs/openapi.json): a CallSnapshot, a MessageSent, or a Problem.' },
            retryAfterS: { type: 'integer', description: 'Seconds to wait before retrying, where the route sends retry-after (429, 503).' },
          },
          ['status', 'body'],
          {
            type: 'reply',
            operationId: '9b2f6c1e-5a3d-4e8f-a1b2-c3d4e5f6a7b8',
            status: 409,
            body: { type: 'https://calling-backend.dev/problems/answer_conflict', title: 'Call answered elsewhere', status: 409, detail: 'the call was answered by another installation', code: 'answer_conflict', snapshot: { callId: '3f1c9a52-7d1e-4f0e-9b8a-2c6d5e4f7a10', state: 'accepted' } },
          },
        ),
        pong: frame('pong', 'Pong', 'The answer to a ping.', {}, [], { type: 'pong' }),
        error: frame(
          'error',
          'Error',
          'A client frame that is not a ping, a command or a well-formed signal (bad_message), or a signal that was dropped (signal_refused, with its reason); the connection stays open.',
          {
            code: { type: 'string', enum: ['bad_message', 'signal_refused'] },
            detail: { type: 'string' },
            reason: { type: 'string', enum: ['not_found', 'not_joined', 'rate_limited', 'unavailable'], description: 'signal_refused only' },
            callId: { type: 'string', description: 'signal_refused only' },
            retryAfterMs: { type: 'integer', description: 'signal_refused with rate_limited only' },
          },
          ['code', 'detail'],
          { type: 'error', code: 'bad_message', detail: 'expected {"type":"ping"} or a command frame (answer, end, rename, message)' },
        ),
        ...Object.fromEntries([...CALL_COMMANDS.keys()].map((c) => [`${c}Command`, commandFrame(c)])),
        ping: frame('ping', 'Ping', 'Application-level keepalive, answered with pong.', {}, [], { type: 'ping' }),
      },
    },
  };
}

/** A live signal's fields (docs/signaling.md "Live signals"); `delivered`: as the recipients get it. */
function signalBody(delivered: boolean): { type: 'object'; properties: Record<string, unknown>; required: string[] } {
  const properties: Record<string, unknown> = {
    callId: { type: 'string' },
    kind: { type: 'string', enum: [...SIGNAL_KINDS] },
    value: { description: `a boolean for muted, speaking, handRaised and video; a string of 1 to ${SIGNAL_REACTION_MAX_CHARS} characters for reaction; any JSON value for custom` },
  };
  if (!delivered) return { type: 'object', properties, required: ['callId', 'kind', 'value'] };
  return {
    type: 'object',
    properties: { ...properties, userId: { type: 'string', description: 'the sender' }, atMs: { type: 'integer', description: 'when the server took it' } },
    required: ['callId', 'userId', 'kind', 'value', 'atMs'],
  };
}
