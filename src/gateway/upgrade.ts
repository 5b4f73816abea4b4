import type { HttpRequest, HttpResponse, us_socket_context_t } from 'uWebSockets.js';
import { originAllowed } from '../config/cors.js';
import { bearerToken } from '../auth/verifier.js';
import { checkToken, type AuthGuard } from '../auth/guard.js';
import { decodeCursor } from '../events/cursor.js';
import { errors, tokenRefusal, type ApiError } from '../commands/errors.js';
import { clientAddress } from '../transport/clientAddress.js';
import { requestIdOf, writeProblem } from '../transport/response.js';
import type { Logger } from '../util/logger.js';
import { negotiate } from './protocol.js';
import type { Admission } from './admission.js';
import type { GatewaySettings, RefusedSocketData, SocketData } from './socket.js';

export interface UpgradeDeps {
  auth: AuthGuard;
  /** New sockets per second (src/gateway/admission.ts). */
  admission: Admission;
  logger: Logger;
  settings: Pick<GatewaySettings, 'clientIpHeader' | 'allowedOrigins' | 'maxSocketsPerUser'>;
  /** Sockets the user holds on this gateway now. */
  socketsOf(userId: string): number;
}

/** A refused socket's data: no user, nothing to sync (src/gateway/socket.ts RefusedSocketData). */
const REFUSED: Omit<RefusedSocketData, 'encoding' | 'retryAfterMs'> = {
  userId: '',
  installationId: '',
  expiresAtS: 0,
  epoch: '',
  lastId: '0-0',
  pending: undefined,
  startCursor: undefined,
  closed: true,
  messages: undefined,
  earlyCalls: undefined,
};

/**
 * GET /v1/signaling's upgrade (docs/signaling.md "Connecting"): the origin, the cursor and the
 * session token are checked before the socket exists, and a refusal is an HTTP problem answered
 * as any route's would be; never accepted first and closed later. The one exception is a socket
 * over the admission rate (src/gateway/admission.ts): closed with 1013 and a time to come back,
 * which a browser can read from a close but not from a refused upgrade.
 */
export function upgradeHandler(deps: UpgradeDeps): (res: HttpResponse, req: HttpRequest, context: us_socket_context_t) => void {
  return (res, req, context) => {
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  // Copy everything from req now: it is gone after this callback returns.
  const key = req.getHeader('sec-websocket-key');
  const protocols = req.getHeader('sec-websocket-protocol');
  const extensions = req.getHeader('sec-websocket-extensions');
  const query = new URLSearchParams(req.getQuery() ?? '');
  const token = bearerToken(req.getHeader('authorization')) ?? query.get('access_token') ?? '';
  const rawCursor = query.get('cursor');
  const origin = req.getHeader('origin');
  const { encoding, protocol } = negotiate(protocols);
  // Over the admission rate: closed at once with a time to come back, before anything costly.
  const retryAfterMs = deps.admission.admit();
  if (retryAfterMs > 0) {
    const refused: RefusedSocketData = { ...REFUSED, encoding, retryAfterMs };
    res.cork(() => res.upgrade(refused, key, protocol, extensions, context));
    return;
  }

  const remoteAddress = clientAddress(res, req, deps.settings.clientIpHeader, () => aborted);
  const requestId = requestIdOf(req);
  // The same answer as any route's refusal (status line, x-request-id, problem+json).
  const reject = (err: ApiError) => {
    if (!aborted) writeProblem(res, { requestId, origin }, err, deps.settings.allowedOrigins);
  };
  const allowed = deps.settings.allowedOrigins;
  if (allowed && origin && !originAllowed(allowed, origin)) {
    reject(errors.forbidden(`origin "${origin}" may not open a signaling socket (CORS_ORIGINS)`));
    return;
  }
  const startCursor = rawCursor ? decodeCursor(rawCursor) : undefined;
  if (rawCursor && !startCursor) {
    reject(errors.badCursor());
    return;
  }
  if (!token) {
    reject(errors.unauthorized('missing token; send "Authorization: Bearer <token>" or ?access_token='));
    return;
  }
  // Checked once, at the upgrade: not kept in the cache of verified tokens, which would
  // otherwise hold up to 10,000 tokens for a gateway's idle sockets (docs/performance.md).
  checkToken(deps.auth, token, remoteAddress, false).then(
    (result) => {
      if (aborted) return;
      if (!result.ok) {
        reject(tokenRefusal(result));
        return;
      }
      const principal = result.principal;
      // Per-user cap: refused before upgrading, so a leaked or abusive client cannot hold
      // thousands of sockets (and the user's other devices keep theirs). The count moves
      // synchronously (open runs within upgrade), so concurrent upgrades cannot overshoot.
      const cap = deps.settings.maxSocketsPerUser;
      if (cap > 0 && deps.socketsOf(principal.userId) >= cap) {
        reject(errors.rateLimited(`this user already has ${cap} open signaling sockets on this server (WS_MAX_SOCKETS_PER_USER); close one first`, 10_000));
        return;
      }
      const data: SocketData = {
        userId: principal.userId,
        installationId: principal.installationId,
        expiresAtS: Math.floor(principal.expiresAtMs / 1000),
        encoding,
        epoch: '',
        lastId: '0-0',
        pending: [],
        startCursor,
        closed: false,
        messages: undefined,
        earlyCalls: undefined,
      };
      res.cork(() => res.upgrade(data, key, protocol, extensions, context));
    },
    (err: unknown) => {
      deps.logger.error({ err }, 'signaling upgrade failed');
      reject(errors.internal());
    },
  );
};
}
