import { io as connectSio, type Socket } from 'socket.io-client';
import type { BenchContext } from '../lib/context.js';
import { startHelper, type ListeningProcess } from '../lib/processes.js';
import { nowMs, sleep } from '../lib/clock.js';
import { device } from '../lib/users.js';

/**
 * The reconnect storm against Socket.IO 4 with connection state recovery and the Redis Streams
 * adapter (bench/socketio/recoveryServer.ts), two servers on the bench's Redis, the same number
 * of devices and rate of changes: each change is one packet to one device's room. Server A is
 * killed with SIGKILL; its clients (socket.io-client, its own backoff with jitter, a base delay
 * of 250 ms like ours) reconnect to B, which restores what they missed from the stream.
 */

export interface SioStorm {
  onA: number;
  resyncedMs: number[];
  /** Clients of A whose reconnect was not a recovery (Socket.IO then restores nothing). */
  notRecovered: number;
  sent: number;
  lost: number;
  repeats: number;
  outOfOrder: number;
  errors: Record<string, number>;
}

export async function socketioStorm(ctx: BenchContext, z: { devices: number; rate: number; beforeMs: number; afterMs: number }): Promise<SioStorm> {
  const key = `sio-rc${ctx.tag}`;
  const start = (label: string) => startHelper(label, 'bench/socketio/recoveryServer.ts', { ...(ctx.cluster ? { REDIS_CLUSTER_NODES: ctx.cluster.seedList } : { REDIS_URL: ctx.redisUrl }), AUTH_JWT_SECRET: ctx.secret, SIO_KEY: key });
  const [A, B] = await Promise.all([start('socketio-rc-A'), start('socketio-rc-B')]);
  ctx.track(A);
  ctx.track(B);
  const errors: Record<string, number> = {};
  const count = (k: string) => (errors[k] = (errors[k] ?? 0) + 1);
  const url = (p: ListeningProcess) => `http://127.0.0.1:${p.port}`;
  let aDead = false;
  interface Client { userId: string; home: 'A' | 'B'; socket: Socket; got: string[]; connects: { atMs: number; recovered: boolean }[] }
  const clients: Client[] = [];
  let producer: Socket | undefined;
  try {
    for (let i = 0; i < z.devices; i++) {
      const d = device(ctx.secret, `sio-rc-${ctx.tag}-${i}`, `sio-rc-${ctx.tag}-${i}-phone`);
      const home = i % 2 === 0 ? 'A' : 'B';
      const socket = connectSio(url(home === 'A' ? A : B), { transports: ['websocket'], auth: { token: d.token }, reconnectionDelay: 250, reconnectionDelayMax: 10_000, forceNew: true });
      const c: Client = { userId: d.userId, home, socket, got: [], connects: [] };
      socket.on('connect', () => c.connects.push({ atMs: nowMs(), recovered: socket.recovered }));
      // A load balancer's view: once A is dead, A's address leads to B.
      socket.on('disconnect', () => {
        if (aDead && home === 'A') (socket.io as unknown as { uri: string }).uri = url(B);
      });
      socket.on('event', (e: { callId: string; seq: number }) => c.got.push(`${e.callId}/${e.seq}`));
      clients.push(c);
    }
    const deadline = nowMs() + 120_000;
    while (clients.some((c) => c.connects.length === 0) && nowMs() < deadline) await sleep(20);
    producer = connectSio(url(B), { transports: ['websocket'], auth: { token: device(ctx.secret, `sio-rc-${ctx.tag}-producer`, 'producer').token }, forceNew: true });
    await new Promise<void>((resolve) => producer!.once('connect', () => resolve()));

    // The same flow: `rate` changes a second, each a packet to one device (its call's next seq).
    const sent = new Map<string, string[]>();
    let next = 0;
    let owed = 0;
    const ticker = setInterval(() => {
      owed += z.rate / 50;
      for (; owed >= 1; owed--) {
        const c = clients[next++ % clients.length]!;
        const list = sent.get(c.userId) ?? [];
        const callId = `call-${c.userId}-${Math.floor(list.length / 9)}`;
        const seq = (list.length % 9) + 1;
        list.push(`${callId}/${seq}`);
        sent.set(c.userId, list);
        producer!.timeout(10_000).emit('change', { toUserId: c.userId, callId, seq }, (err: Error | null, reply?: { ok: boolean }) => {
          if (err || !reply?.ok) count(err ? 'change: no ack' : 'change refused');
        });
      }
    }, 20);
    await sleep(z.beforeMs);
    aDead = true;
    const killedAt = nowMs();
    process.kill(A.pid, 'SIGKILL');
    const onA = clients.filter((c) => c.home === 'A');
    while (!onA.every((c) => c.connects.some((x) => x.atMs > killedAt)) && nowMs() < killedAt + 120_000) await sleep(20);
    await sleep(z.afterMs);
    clearInterval(ticker);
    await sleep(1000);

    let lost = 0;
    let repeats = 0;
    let outOfOrder = 0;
    let total = 0;
    for (const c of clients) {
      const expected = sent.get(c.userId) ?? [];
      total += expected.length;
      const got = new Set(c.got);
      lost += expected.filter((e) => !got.has(e)).length;
      repeats += c.got.length - got.size;
      const last = new Map<string, number>();
      for (const e of c.got) {
        const [callId, seq] = e.split('/') as [string, string];
        if (Number(seq) <= (last.get(callId) ?? 0)) outOfOrder++;
        last.set(callId, Number(seq));
      }
    }
    const back = onA.map((c) => c.connects.find((x) => x.atMs > killedAt)).filter((x): x is { atMs: number; recovered: boolean } => x !== undefined);
    return {
      onA: onA.length,
      resyncedMs: back.map((x) => x.atMs - killedAt).sort((a, b) => a - b),
      notRecovered: back.filter((x) => !x.recovered).length,
      sent: total,
      lost,
      repeats,
      outOfOrder,
      errors,
    };
  } finally {
    producer?.disconnect();
    for (const c of clients) c.socket.disconnect();
    await Promise.all([A, B].map((p) => ctx.stopServer(p).catch(() => {})));
  }
}
