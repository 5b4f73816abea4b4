import type { Server } from 'socket.io';
import { createTokenVerifier } from '../../src/auth/verifier.js';

/**
 * The bench's Socket.IO servers authenticate a socket as ours do: the session JWT in the
 * handshake's `auth.token`, checked by the project's own verifier (AUTH_JWT_SECRET); the user
 * goes into `socket.data.userId`.
 */
export function authenticateSockets(io: Server): void {
  const verify = createTokenVerifier({ secret: process.env.AUTH_JWT_SECRET });
  io.use((socket, next) => {
    Promise.resolve()
      .then(() => verify(String((socket.handshake.auth as { token?: unknown }).token ?? '')))
      .then(
        (principal) => {
          socket.data.userId = principal.userId;
          next();
        },
        () => next(new Error('unauthorized')),
      );
  });
}
