import type { BenchContext, CpuShares } from '../lib/context.js';
import { mergeHists } from '../lib/context.js';
import { GeneratorPool, generatorCpu } from '../lib/generators.js';
import type { HistogramSummary } from '../lib/histogram.js';
import { settledRss, startHelper, type ListeningProcess } from '../lib/processes.js';
import { nowMs, sleep } from '../lib/clock.js';
import { errorList, fmtBytes, fmtMs, fmtNum, fmtRate, mdTable, ratio, type ScenarioResult } from '../lib/report.js';
import type { DeliveryResult, DeliveryRun, DeliverySetup } from '../workers/delivery.js';
import { describeBound } from './callSteps.js';

/**
 * Event delivery, side by side with the usual alternative: the same workload (N users with an
 * authenticated socket on process B, events posted over HTTP to process A, delivered through
 * Redis) on the calling backend's real path and on Socket.IO 4 + its Redis adapter. Measured
 * for each: saturation throughput (closed loop, same concurrency), latency at one common
 * open-loop rate both can carry, and memory per connection on B.
 */

export const GOAL_DELIVERY_FACTOR = 5;

type System = 'calling' | 'socketio';

interface SystemFigures {
  system: System;
  sockets: number;
  bytesPerSocket: number | undefined;
  throughput: { perSecond: number; errors: Record<string, number>; latency: Record<string, HistogramSummary>; cpu: CpuShares; bound: string; generatorBound: boolean };
  latency?: { rate: number; perSecond: number; errors: Record<string, number>; latency: Record<string, HistogramSummary>; bound: string };
}

export async function compareScenario(ctx: BenchContext): Promise<ScenarioResult> {
  if (!ctx.selfHosted) {
    return { id: 'compare', title: 'Event delivery vs Socket.IO', headlines: [], goals: [], markdown: 'Not run: targeting an existing deployment (the comparison starts its own processes).', data: null };
  }
  const z = ctx.opts.sizes.compare;
  const prefix = `cmp${ctx.tag}`;
  const [ca, cb, sa, sb] = await Promise.all([
    ctx.startServer('calling-A', { ROLES: 'api,worker', REDIS_PREFIX: prefix }),
    ctx.startServer('calling-B', { ROLES: 'gateway', REDIS_PREFIX: prefix }),
    startSio(ctx, 'socketio-A', prefix),
    startSio(ctx, 'socketio-B', prefix),
  ]);
  const systems: Record<System, { a: ListeningProcess; b: ListeningProcess; pool?: GeneratorPool; figures?: SystemFigures }> = {
    calling: { a: ca, b: cb },
    socketio: { a: sa, b: sb },
  };
  try {
    const order: System[] = ['socketio', 'calling'];
    for (const system of order) {
      const sys = systems[system];
      await sleep(500);
      const before = (await settledRss(sys.b.pid)) ?? 0;
      const gens = ctx.opts.generators;
      sys.pool = await GeneratorPool.start(gens, 'delivery', (i) => ({
        system,
        publishUrl: sys.a.url,
        socketUrl: sys.b.url,
        secret: ctx.secret,
        tag: `${ctx.tag}${system[0]}`,
        gen: i,
        users: Math.ceil(z.sockets / gens),
        localAddresses: ctx.localAddresses(z.sockets, system === 'calling' ? 3 : 4),
      }) satisfies DeliverySetup);
      await sleep(300);
      const after = (await settledRss(sys.b.pid)) ?? 0;
      const sockets = Math.ceil(z.sockets / gens) * gens;
      const bytesPerSocket = after > 0 && before > 0 ? (after - before) / sockets : undefined;
      ctx.log(`  ${system}: ${fmtNum(sockets)} sockets on B, ${bytesPerSocket !== undefined ? fmtBytes(bytesPerSocket) : 'n/a'} RSS per socket`);
      const pids = { [`${system} A`]: sys.a.pid, [`${system} B`]: sys.b.pid, ...Object.fromEntries(sys.pool.pids().map((p, i) => [`generator ${i}`, p])) };
      const stop = await ctx.cpuWindow(pids);
      const outs = await sys.pool.run<DeliveryResult>(() => ({ mode: 'closed', concurrency: Math.ceil(z.concurrency / gens), durationMs: z.throughputMs, startAtMs: nowMs() + 200, timeoutMs: 5000 }) satisfies DeliveryRun);
      const cpu = await stop();
      const gen = generatorCpu(outs);
      const done = outs.reduce((a, o) => a + o.result.done, 0);
      const errors = mergeErrors(outs.map((o) => o.result.errors));
      const perSecond = (done * 1000) / z.throughputMs;
      const bound = describeBound(cpu, gen.bound, gen.maxShare);
      sys.figures = {
        system,
        sockets,
        bytesPerSocket,
        throughput: { perSecond, errors, latency: mergeHists(outs.map((o) => o.result.hist)), cpu, bound, generatorBound: gen.bound },
      };
      ctx.log(`  ${system}: ${fmtRate(perSecond)} deliveries (closed loop, ${z.concurrency} in flight), errors ${errorList(errors)}; ${bound}`);
    }
    // Latency at one open-loop rate both sustain: half the slower one's throughput.
    const common = Math.max(50, Math.round(Math.min(...order.map((s) => systems[s].figures!.throughput.perSecond)) / 2));
    for (const system of order) {
      const sys = systems[system];
      const pids = { [`${system} A`]: sys.a.pid, [`${system} B`]: sys.b.pid, ...Object.fromEntries(sys.pool!.pids().map((p, i) => [`generator ${i}`, p])) };
      const stop = await ctx.cpuWindow(pids);
      const outs = await sys.pool!.run<DeliveryResult>(() => ({ mode: 'open', rate: common / sys.pool!.size, durationMs: z.latencyMs, startAtMs: nowMs() + 200, timeoutMs: 5000 }) satisfies DeliveryRun);
      const cpu = await stop();
      const gen = generatorCpu(outs);
      const done = outs.reduce((a, o) => a + o.result.done, 0);
      const latency = mergeHists(outs.map((o) => o.result.hist));
      sys.figures!.latency = { rate: common, perSecond: (done * 1000) / z.latencyMs, errors: mergeErrors(outs.map((o) => o.result.errors)), latency, bound: describeBound(cpu, gen.bound, gen.maxShare) };
      ctx.log(`  ${system} at ${fmtRate(common)}: delivery p50 ${fmtMs(latency['delivery (send → socket)']?.p50 ?? NaN)} p99 ${fmtMs(latency['delivery (send → socket)']?.p99 ?? NaN)}`);
    }
    return report(ctx, systems.calling.figures!, systems.socketio.figures!);
  } finally {
    for (const s of Object.values(systems)) {
      await s.pool?.close();
      await ctx.stopServer(s.a);
      await ctx.stopServer(s.b);
    }
  }
}

async function startSio(ctx: BenchContext, label: string, prefix: string): Promise<ListeningProcess> {
  const p = await startHelper(label, 'bench/socketio/server.ts', { REDIS_URL: ctx.redisUrl, AUTH_JWT_SECRET: ctx.secret, SIO_KEY: `sio${prefix}` });
  ctx.track(p);
  return p;
}

function mergeErrors(list: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const e of list) for (const [k, v] of Object.entries(e)) out[k] = (out[k] ?? 0) + v;
  return out;
}

function report(ctx: BenchContext, ours: SystemFigures, sio: SystemFigures): ScenarioResult {
  const z = ctx.opts.sizes.compare;
  const d = 'delivery (send → socket)';
  const oursP99 = ours.latency?.latency[d]?.p99 ?? NaN;
  const sioP99 = sio.latency?.latency[d]?.p99 ?? NaN;
  const factor = ours.throughput.perSecond / Math.max(1e-9, sio.throughput.perSecond);
  const noErrors = Object.keys(ours.throughput.errors).length === 0 && Object.keys(ours.latency?.errors ?? {}).length === 0;
  const met = factor >= GOAL_DELIVERY_FACTOR && oursP99 < sioP99 && noErrors;
  const redisCreate = ctx.ceilings.redis?.create;
  const httpCeiling = ctx.ceilings.http?.requestsPerSecond;
  const rowOf = (f: SystemFigures, name: string) => {
    const t = f.throughput.latency[d];
    const l = f.latency?.latency[d];
    return [
      name,
      fmtRate(f.throughput.perSecond),
      `${fmtMs(t?.p50 ?? NaN)} / ${fmtMs(t?.p99 ?? NaN)}`,
      `${fmtMs(l?.p50 ?? NaN)} / ${fmtMs(l?.p99 ?? NaN)} / ${fmtMs(l?.max ?? NaN)}`,
      f.bytesPerSocket !== undefined ? fmtBytes(f.bytesPerSocket) : 'n/a',
      errorList({ ...f.throughput.errors, ...(f.latency?.errors ?? {}) }),
      f.throughput.bound,
    ];
  };
  const md = [
    `Same workload for both: ${fmtNum(ours.sockets)} users, each with one authenticated socket (same HS256 session JWT, verified by the project's verifier) on process B; ` +
      `events are posted over HTTP to process A and reach the socket on B through the same Redis. ` +
      `**calling-backend**: the real path of an event: every user has an accepted call (set up first); each event is \`POST /v1/calls/{id}/rename\` on A (ROLES=api,worker) → renameCall.lua (call state, revision, idempotency record and outbox entry, atomically) → relay → appendEvents.lua (per-user event log + PUBLISH) → gateway B (ROLES=gateway) → \`call.renamed\`. A rename is the lightest change that produces an event (a call creation also pays for its ring timer and busy check, which are not event delivery); unlike Socket.IO's, each event is stored and can be resumed by cursor. ` +
      `**Socket.IO 4 + @socket.io/redis-adapter** (\`bench/socketio/server.ts\`): \`POST /v1/events\` on A → \`io.to('user:<id>').emit()\` → adapter PUBLISH → B → socket (websocket transport only). ` +
      `Note the asymmetry: the calling backend also stores the call, keeps every event in a resumable per-user log and schedules the ring timer; Socket.IO only forwards (an event is lost if the socket is down).`,
    '',
    `Throughput: closed loop, ${z.concurrency} deliveries in flight, ${z.throughputMs / 1000} s. Latency: open loop at ${fmtRate(ours.latency?.rate ?? 0)} for both (half the slower system's throughput), ${z.latencyMs / 1000} s, measured from the scheduled send.`,
    '',
    mdTable(['system', 'deliveries/s (saturated)', 'p50 / p99 saturated', `p50 / p99 / max at ${fmtRate(ours.latency?.rate ?? 0)}`, `B memory per socket (RSS growth / ${fmtNum(ours.sockets)}, after GC)`, 'errors', 'bound (saturated)'], [
      rowOf(ours, 'calling-backend (uWS + Redis streams)'),
      rowOf(sio, 'Socket.IO 4 + Redis adapter'),
    ]),
    '',
    `**Throughput factor: ${factor.toFixed(2)}×** Socket.IO's (goal ≥ ${GOAL_DELIVERY_FACTOR}×); p99 at the common rate ${fmtMs(oursP99)} vs ${fmtMs(sioP99)}.`,
    '',
    `Ratios to this run's ceilings: calling-backend deliveries ${ratio(ours.throughput.perSecond, redisCreate)} of the Redis-bound create+deliver ceiling (${redisCreate ? fmtRate(redisCreate) : 'n/a'}); ` +
      `${ratio(ours.throughput.perSecond, httpCeiling)} of the raw uWS HTTP ceiling (one request per delivery); Socket.IO ${ratio(sio.throughput.perSecond, httpCeiling)} of the raw uWS HTTP ceiling.`,
    '',
    `Bound at the common rate — calling-backend: ${ours.latency?.bound ?? 'n/a'}; Socket.IO: ${sio.latency?.bound ?? 'n/a'}.`,
  ].join('\n');
  return {
    id: 'compare',
    title: 'Event delivery vs Socket.IO 4 + Redis adapter',
    headlines: [
      {
        metric: 'event deliveries/s (saturated): ours vs Socket.IO',
        value: `${fmtRate(ours.throughput.perSecond)} vs ${fmtRate(sio.throughput.perSecond)} (${factor.toFixed(2)}×)`,
        ceiling: redisCreate ? `Redis-bound create ${fmtRate(redisCreate)}` : 'n/a',
        ratio: ratio(ours.throughput.perSecond, redisCreate),
        bound: ours.throughput.bound,
      },
      {
        metric: `delivery p99 at ${fmtRate(ours.latency?.rate ?? 0)}: ours vs Socket.IO`,
        value: `${fmtMs(oursP99)} vs ${fmtMs(sioP99)}`,
        ceiling: 'Socket.IO (same run)',
        ratio: `${(oursP99 / sioP99).toFixed(2)}×`,
      },
      {
        metric: `memory per connection on B (average over ${fmtNum(ours.sockets)}): ours vs Socket.IO`,
        value:
          `${ours.bytesPerSocket !== undefined ? fmtBytes(ours.bytesPerSocket) : 'n/a'} vs ${sio.bytesPerSocket !== undefined ? fmtBytes(sio.bytesPerSocket) : 'n/a'}` +
          (ctx.findings.idleBytesPerSocket !== undefined ? ` (ours, marginal, idle scenario: ${fmtBytes(ctx.findings.idleBytesPerSocket)})` : ''),
        ceiling: ctx.ceilings.rawWsBytesPerSocket !== undefined ? `raw uWS ${fmtBytes(ctx.ceilings.rawWsBytesPerSocket)}` : 'raw uWS: measured in idle',
        ratio: ours.bytesPerSocket !== undefined && sio.bytesPerSocket ? `${(ours.bytesPerSocket / sio.bytesPerSocket).toFixed(2)}× Socket.IO's` : 'n/a',
      },
    ],
    goals: [
      {
        goal: `event delivery ≥ ${GOAL_DELIVERY_FACTOR}× Socket.IO's throughput at a lower p99`,
        target: `≥ ${GOAL_DELIVERY_FACTOR}× and p99 below Socket.IO's`,
        measured: `${factor.toFixed(2)}× (${fmtRate(ours.throughput.perSecond)} vs ${fmtRate(sio.throughput.perSecond)}); p99 ${fmtMs(oursP99)} vs ${fmtMs(sioP99)}; errors: ${errorList(ours.throughput.errors)}`,
        status: met ? 'MET' : 'MISSED',
        atGoalSize: true,
        note: `ours: ${ours.throughput.bound}; Socket.IO: ${sio.throughput.bound}`,
      },
    ],
    markdown: md,
    data: { ours, socketio: sio },
  };
}
