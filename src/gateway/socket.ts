import type { WebSocket } from 'uWebSockets.js';
import type { CorsOrigins } from '../config/cors.js';
import type { KeySpace } from '../redis/keys.js';
import type { LiveMessage } from '../events/eventLog.js';
import type { Cursor } from '../events/cursor.js';
import type { TokenBucket } from '../limits/rateLimiter.js';
import type { Encoding } from './protocol.js';

/** What the gateway is configured with, and what it keeps per socket. */

export interface GatewaySettings extends KeySpace {
  idleTimeoutS: number;
  maxMessageBytes: number;
  maxBackpressureBytes: number;
  /** Page size of log reads while catching up. */
  readBatch: number;
  /** Client messages allowed per 10 s per socket (0: no limit). */
  messagesPer10s: number;
  /** Open sockets one user may hold on this gateway (0: no cap). */
  maxSocketsPerUser: number;
  /** New sockets this gateway takes per second (WS_ADMISSIONS_PER_S; 0: no limit). */
  admissionsPerS: number;
  clientIpHeader: string | undefined;
  /**
   * WS_CHECK_ORIGIN: origins allowed to open a socket (CORS_ORIGINS). An upgrade without an Origin
   * header (a native app, a server) is not a browser's and passes (docs/api.md "CORS").
   */
  allowedOrigins?: CorsOrigins | undefined;
}

/** What a gateway counts (exported as metrics by src/roles/gateway.ts). */
export interface GatewayStats {
  eventsSent: number;
  slowConsumersClosed: number;
  tokensExpired: number;
  rateLimited: number;
  /** Of eventsSent, those sent early, ahead of the log (docs/signaling.md "Early events"). */
  earlyEventsSent: number;
  /** In-call messages sent (docs/api.md "In-call messages"). */
  messagesSent: number;
  /** Live signals sent to sockets, and those refused (docs/signaling.md "Live signals"). */
  signalsSent: number;
  signalsRefused: number;
  /** Command frames answered, by command and status (docs/signaling.md "Commands"). */
  commands: Map<string, number>;
}

/**
 * Per socket, kept small (docs/performance.md "Memory per socket"): fields that matter only for a
 * while (pending, startCursor, messages) are undefined otherwise, and the expiry is whole seconds,
 * a small integer V8 stores in the object itself rather than as a boxed number.
 */
export interface SocketData {
  userId: string;
  installationId: string;
  /** Session token expiry, epoch seconds. */
  expiresAtS: number;
  encoding: Encoding;
  /** Log position this socket has passed (sent or skipped as not for it). */
  epoch: string;
  lastId: string;
  /** Set only while syncing: live messages that arrived meanwhile. */
  pending: LiveMessage[] | undefined;
  /** Cursor given at connect (only until the first sync). */
  startCursor: Cursor | undefined;
  closed: boolean;
  /** Client-message rate limit, created on the first message. */
  messages: TokenBucket | undefined;
  /**
   * Calls whose every early notice this socket has had since the call was created, with the last
   * one's revision (onEarly); created with the first.
   */
  earlyCalls: Map<string, number> | undefined;
}


/**
 * A socket refused by admission control (src/gateway/admission.ts): upgraded only to be closed
 * with 1013 and the time to come back. Only these carry `retryAfterMs`, so admitted sockets keep
 * SocketData's shape.
 */
export interface RefusedSocketData extends SocketData {
  retryAfterMs: number;
}

export type Socket = WebSocket<SocketData>;
