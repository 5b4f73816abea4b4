import { io as connectSio, type Socket } from 'socket.io-client';
import type { BenchContext } from '../lib/context.js';
import { startHelper, type ListeningProcess } from '../lib/processes.js';
import { nowMs, sleep } from '../lib/clock.js';
import { device } from '../lib/users.js';
import { GeneratorPool } from '../lib/generators.js';
import type { SioBack, SioStormSetup } from '../workers/sioStormDevices.js';
import { mergeWayBack } from '../lib/wayBack.js';

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
  wayBack: ReturnType<typeof mergeWayBack>;
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
  let producer: Socket | undefined;
  let pool: GeneratorPool | undefined;
  try {
    // The clients over generator processes, as ours (workers/sioStormDevices.ts).
    const all = Array.from({ length: z.devices }, (_, i) => ({ d: device(ctx.secret, `sio-rc-${ctx.tag}-${i}`, `sio-rc-${ctx.tag}-${i}-phone`), home: (i % 2 === 0 ? 'A' : 'B') as 'A' | 'B' }));
    const procs = Math.max(2, ctx.opts.generators);
    pool = await GeneratorPool.start(procs, 'sioStormDevices', (i): SioStormSetup => ({ aUrl: url(A), bUrl: url(B), devices: all.filter((_, k) => k % procs === i) }));
    const userIds = all.map((c) => c.d.userId);
    producer = connectSio(url(B), { transports: ['websocket'], auth: { token: device(ctx.secret, `sio-rc-${ctx.tag}-producer`, 'producer').token }, forceNew: true });
    await new Promise<void>((resolve) => producer!.once('connect', () => resolve()));

    // The same flow: `rate` changes a second, each a packet to one device (its call's next seq).
    const sent = new Map<string, string[]>();
    let next = 0;
    let owed = 0;
    const ticker = setInterval(() => {
      owed += z.rate / 50;
      for (; owed >= 1; owed--) {
        const userId = userIds[next++ % userIds.length]!;
        const list = sent.get(userId) ?? [];
        const callId = `call-${userId}-${Math.floor(list.length / 9)}`;
        const seq = (list.length % 9) + 1;
        list.push(`${callId}/${seq}`);
        sent.set(userId, list);
        producer!.timeout(10_000).emit('change', { toUserId: userId, callId, seq }, (err: Error | null, reply?: { ok: boolean }) => {
          if (err || !reply?.ok) count(err ? 'change: no ack' : 'change refused');
        });
      }
    }, 20);
    await sleep(z.beforeMs);
    await pool.run(() => ({ aDead: true }));
    const killedAt = nowMs();
    process.kill(A.pid, 'SIGKILL');
    const backs = (await pool.run<SioBack>(() => ({ awaitBack: { killedAt, deadlineMs: 120_000 } }))).map((o) => o.result);
    await sleep(z.afterMs);
    clearInterval(ticker);
    await sleep(1000);
    const received = Object.assign({}, ...(await pool.run<Record<string, string[]>>(() => ({ received: true }))).map((o) => o.result)) as Record<string, string[]>;

    let lost = 0;
    let repeats = 0;
    let outOfOrder = 0;
    let total = 0;
    for (const userId of userIds) {
      const expected = sent.get(userId) ?? [];
      const list = received[userId] ?? [];
      total += expected.length;
      const got = new Set(list);
      lost += expected.filter((e) => !got.has(e)).length;
      repeats += list.length - got.size;
      const last = new Map<string, number>();
      for (const e of list) {
        const [callId, seq] = e.split('/') as [string, string];
        if (Number(seq) <= (last.get(callId) ?? 0)) outOfOrder++;
        last.set(callId, Number(seq));
      }
    }
    const back = backs.flatMap((b) => b.back);
    return {
      onA: backs.reduce((n, b) => n + b.onA, 0),
      resyncedMs: back.map((x) => x.ms).sort((a, b) => a - b),
      notRecovered: back.filter((x) => !x.recovered).length,
      sent: total,
      lost,
      repeats,
      outOfOrder,
      errors,
      wayBack: mergeWayBack(backs.map((b) => b.wayBack)),
    };
  } finally {
    producer?.disconnect();
    await pool?.close();
    await Promise.all([A, B].map((p) => ctx.stopServer(p).catch(() => {})));
  }
}
