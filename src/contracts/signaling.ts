/** The signaling socket's contract (docs/signaling.md): its subprotocols and close codes. */
export const SUBPROTOCOL_JSON = 'calling.v1.json';
export const SUBPROTOCOL_MSGPACK = 'calling.v1.msgpack';

export const CLOSE = {
  normal: 1000,
  /** Server shutting down: reconnect (to any gateway) with your last cursor. */
  goingAway: 1001,
  /** A client frame larger than WS_MAX_MESSAGE_BYTES. */
  tooBig: 1009,
  /**
   * Try again later (RFC 6455's registry): the gateway is admitting sockets at its limit
   * (WS_ADMISSIONS_PER_S). The reason says when to come back: `retry after <ms> ms`.
   */
  tryAgainLater: 1013,
  /** A frame that is not a valid client message. */
  badMessage: 4000,
  /** The session token expired: reconnect with a fresh token and your last cursor. */
  tokenExpired: 4001,
  /** Too many messages from this connection. */
  rateLimited: 4029,
  /**
   * The app's backend signed this installation out (the server API, docs/server-api.md): do not
   * reconnect with this session.
   */
  signedOut: 4010,
  /** The socket could not keep up (send buffer full): reconnect and resume from your cursor. */
  slowConsumer: 4008,
} as const;

