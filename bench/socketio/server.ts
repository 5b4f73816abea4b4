import { createServer } from 'node:http';
import { Server } from 'socket.io';
import { createAdapter } from '@socket.io/redis-adapter';
import { Redis } from 'ioredis';
import { authenticateSockets } from './auth.js';

/**
 * The usual alternative, for the in-call message comparison (bench/README.md, `compare`): a
 * Socket.IO 4 server with the Redis adapter, as most Node call-signaling servers are built.
 * Sockets authenticate with the same session JWT (verified by the project's own verifier) and
 * join room `user:<userId>`. A client emits `message` `{toUserId, payload}` (with an ack); the
 * server emits `message` `{fromUserId, payload}` to that user's room through the Redis adapter,
 * so a socket on another process gets it, and acks `{ok: true}`. Nothing is stored or checked
 * beyond the token: a message to a socket that is down is lost. Live signals: a socket `join`s
 * room `call:<id>` (acked), and `signal` `{room, value}` goes to the room's other sockets (a
 * sender not in the room is ignored), unacked, as the calling backend's `signal` frame is.
 * Env: PORT (0), REDIS_URL, AUTH_JWT_SECRET, SIO_KEY (the adapter's channel prefix).
 * Prints `{"msg":"listening","port":N}`.
 */

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const pub = new Redis(redisUrl);
const sub = pub.duplicate();

const http = createServer((_req, res) => res.writeHead(404).end());
const io = new Server(http, {
  transports: ['websocket'],
  serveClient: false,
  adapter: createAdapter(pub, sub, { key: process.env.SIO_KEY ?? 'socket.io' }),
});

authenticateSockets(io);
io.on('connection', (socket) => {
  void socket.join(`user:${String(socket.data.userId)}`);
  socket.on('message', (m: { toUserId?: unknown; payload?: unknown }, ack?: (reply: { ok: boolean }) => void) => {
    if (typeof m?.toUserId !== 'string' || typeof m.payload !== 'object' || m.payload === null) {
      ack?.({ ok: false });
      return;
    }
    io.to(`user:${m.toUserId}`).emit('message', { fromUserId: socket.data.userId as string, payload: m.payload });
    ack?.({ ok: true });
  });
  // Live signals, as a Socket.IO app sends mute or speaking: a room per call, joined by each
  // member's socket; a signal goes to the room's other sockets through the adapter, unacked.
  socket.on('join', (m: { room?: unknown }, ack?: (reply: { ok: boolean }) => void) => {
    if (typeof m?.room !== 'string') return ack?.({ ok: false });
    void socket.join(`call:${m.room}`);
    ack?.({ ok: true });
  });
  socket.on('signal', (m: { room?: unknown; value?: unknown }) => {
    if (typeof m?.room !== 'string' || !socket.rooms.has(`call:${m.room}`)) return;
    socket.to(`call:${m.room}`).emit('signal', { fromUserId: socket.data.userId as string, value: m.value });
  });
});

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
