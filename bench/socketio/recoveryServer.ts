import { createServer } from 'node:http';
import { Server } from 'socket.io';
import { createAdapter } from '@socket.io/redis-streams-adapter';
import { Cluster, Redis } from 'ioredis';
import { authenticateSockets } from './auth.js';

/**
 * The peer in the reconnect storm (bench/README.md "Reconnect storm"): Socket.IO 4 with
 * connection state recovery and the Redis Streams adapter, which restores the packets a socket
 * missed, across servers, for `maxDisconnectionDuration`. Sockets authenticate with the same
 * session JWT and join room `user:<userId>` (a recovered socket gets its rooms back). A producer
 * socket emits `change` `{toUserId, callId, seq}`; the server broadcasts `event` `{callId, seq}`
 * to that user's room through the adapter, and acks.
 * Env: PORT (0), REDIS_URL or REDIS_CLUSTER_NODES (`host:port,…`: the bench's `--cluster`, where the
 * adapter's stream lives in one slot, as it would in production), AUTH_JWT_SECRET, SIO_KEY (the
 * adapter's stream and session prefix).
 * Prints `{"msg":"listening","port":N}`.
 */

const seeds = process.env.REDIS_CLUSTER_NODES;
const redis = seeds
  ? new Cluster(seeds.split(',').map((s) => ({ host: s.slice(0, s.lastIndexOf(':')), port: Number(s.slice(s.lastIndexOf(':') + 1)) })))
  : new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const key = process.env.SIO_KEY ?? 'socket.io';

const http = createServer((_req, res) => res.writeHead(404).end());
const io = new Server(http, {
  transports: ['websocket'],
  serveClient: false,
  connectionStateRecovery: { maxDisconnectionDuration: 120_000, skipMiddlewares: true },
  // A stream long enough that no packet of the storm is trimmed before its socket comes back.
  adapter: createAdapter(redis, { streamName: `${key}:stream`, sessionKeyPrefix: `${key}:session:`, maxLen: 1_000_000 }),
});

authenticateSockets(io);
io.on('connection', (socket) => {
  if (!socket.recovered) void socket.join(`user:${String(socket.data.userId)}`);
  socket.on('change', (m: { toUserId?: unknown; callId?: unknown; seq?: unknown }, ack?: (reply: { ok: boolean }) => void) => {
    if (typeof m?.toUserId !== 'string' || typeof m.callId !== 'string' || typeof m.seq !== 'number') {
      ack?.({ ok: false });
      return;
    }
    io.to(`user:${m.toUserId}`).emit('event', { callId: m.callId, seq: m.seq });
    ack?.({ ok: true });
  });
});

http.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const addr = http.address();
  process.stdout.write(`${JSON.stringify({ msg: 'listening', port: typeof addr === 'object' && addr ? addr.port : 0 })}\n`);
});
process.on('SIGTERM', () => {
  void io.close();
  redis.disconnect();
  process.exit(0);
});
