import { packageVersion } from '../util/packageInfo.js';
import { CLOSE, SUBPROTOCOL_JSON, SUBPROTOCOL_MSGPACK } from './protocol.js';

/**
 * The AsyncAPI 3.0 document of /v1/signaling (docs/signaling.md in machine-readable form): the
 * frames each way, the close codes, and the events, whose payloads are $refs to the JSON Schemas
 * in docs/schemas/. Checked in as docs/asyncapi.json; a test parses it with @asyncapi/parser.
 */

const eventSchemas = ['call.invited', 'call.accepted', 'call.ended', 'call.renamed'].map((name) => ({ $ref: `./schemas/${name}.json` }));

/** Close codes and what a client does about each (docs/signaling.md "Close codes"). */
export const CLOSE_CODES: readonly { code: number; meaning: string; action: string }[] = [
  { code: CLOSE.normal, meaning: 'normal close', action: 'nothing' },
  { code: CLOSE.goingAway, meaning: 'server shutting down', action: 'reconnect (any gateway) with the last cursor' },
  { code: CLOSE.tooBig, meaning: 'client frame larger than WS_MAX_MESSAGE_BYTES', action: 'fix the client' },
  { code: 1011, meaning: 'temporary server failure', action: 'reconnect with the last cursor, with backoff' },
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
        'order by `revision`. Actions go through the HTTP API (docs/openapi.json). Protocol: docs/protocol.md and ' +
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
          pong: { $ref: '#/components/messages/pong' },
          error: { $ref: '#/components/messages/error' },
          ping: { $ref: '#/components/messages/ping' },
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
        summary: 'What the server sends: events, gaps, the end of the replay, pongs and errors.',
        messages: ['event', 'gap', 'synced', 'pong', 'error'].map((m) => ({ $ref: `#/channels/signaling/messages/${m}` })),
      },
      sendPing: {
        action: 'send',
        channel: { $ref: '#/channels/signaling' },
        title: 'Keepalive',
        summary: `The only client frame; at most RATE_WS_MESSAGES_PER_10S per 10 s (else close ${CLOSE.rateLimited}).`,
        messages: [{ $ref: '#/channels/signaling/messages/ping' }],
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
          'One call event for this installation; `event` is call.invited, call.accepted, call.ended or call.renamed.',
          { cursor, event: { oneOf: eventSchemas } },
          ['cursor', 'event'],
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
        synced: frame('synced', 'Synced', 'The replay is complete; what follows is live.', { cursor }, ['cursor'], {
          type: 'synced',
          cursor: 'mhx2k9c1a7f3qz_1795236718009-0',
        }),
        pong: frame('pong', 'Pong', 'The answer to a ping.', {}, [], { type: 'pong' }),
        error: frame(
          'error',
          'Error',
          'A client frame was not understood; the connection stays open.',
          { code: { type: 'string' }, detail: { type: 'string' } },
          ['code', 'detail'],
          { type: 'error', code: 'bad_message', detail: 'expected {"type":"ping"}' },
        ),
        ping: frame('ping', 'Ping', 'Application-level keepalive, answered with pong.', {}, [], { type: 'ping' }),
      },
    },
  };
}
