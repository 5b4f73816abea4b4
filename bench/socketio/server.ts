import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Server } from 'socket.io';
import { createAdapter } from '@socket.io/redis-adapter';
import { Redis } from 'ioredis';
import { bearerToken, createTokenVerifier } from '../../src/auth/verifier.js';

/**
 * The usual alternative, for the event-delivery comparison: a Socket.IO 4 server with the Redis
 * adapter, as most Node call-signaling servers are built. Sockets authenticate with the same
 * session JWT (verified by the project's own verifier) and join room `user:<userId>`; an event
 * for a user is posted to any process (`POST /v1/events {toUserId, event}`, same bearer token)
 * and emitted to that room through the Redis adapter, so a socket on another process gets it.
 * Env: PORT (0), REDIS_URL, AUTH_JWT_SECRET, SIO_KEY (the adapter's channel prefix).
 * Prints `{"msg":"listening","port":N}`.
 */

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const verify = createTokenVerifier({ secret: process.env.AUTH_JWT_SECRET });
const pub = new Redis(redisUrl);
const sub = pub.duplicate();

const http = createServer((req, res) => void handle(req, res));
const io = new Server(http, {
  transports: ['websocket'],
  serveClient: false,
  adapter: createAdapter(pub, sub, { key: process.env.SIO_KEY ?? 'socket.io' }),
});

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
io.on('connection', (socket) => {
  void socket.join(`user:${String(socket.data.userId)}`);
});

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.method !== 'POST' || req.url !== '/v1/events') {
    res.writeHead(404).end();
    return;
  }
  try {
    await verify(bearerToken(req.headers.authorization ?? '') ?? '');
  } catch {
    res.writeHead(401, { 'content-type': 'application/json' }).end('{"code":"unauthorized"}');
    return;
  }
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  let body: { toUserId?: unknown; event?: unknown };
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof body;
  } catch {
    res.writeHead(400).end();
    return;
  }
  if (typeof body.toUserId !== 'string' || typeof body.event !== 'object') {
    res.writeHead(400).end();
    return;
  }
  io.to(`user:${body.toUserId}`).emit('event', body.event);
  res.writeHead(202, { 'content-type': 'application/json' }).end('{"ok":true}');
}

http.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const addr = http.address();
  process.stdout.write(`${JSON.stringify({ msg: 'listening', port: typeof addr === 'object' && addr ? addr.port : 0 })}\n`);
});
process.on('SIGTERM', () => {
  void io.close();
  pub.disconnect();
  sub.disconnect();
  process.exit(0);
});
