import type { BenchContext, CpuShares } from '../lib/context.js';
import { mergeHists } from '../lib/context.js';
import { GeneratorPool, generatorCpu } from '../lib/generators.js';
import type { HistogramSummary } from '../lib/histogram.js';
import type { ListeningProcess } from '../lib/processes.js';
import { nowMs } from '../lib/clock.js';
import { errorList, fmtMs, fmtNum, fmtRate, mdTable, type Goal, type Headline } from '../lib/report.js';
import { fmtSpread, spreadOf, verdict, type Spread } from '../lib/spread.js';
import { DELIVERY } from '../workers/delivery.js';
import type { SignalsResult, SignalsRun, SignalsSetup } from '../workers/signals.js';
import { describeBound } from './callSteps.js';
import WebSocket from 'ws';
import { startHelper } from '../lib/processes.js';
import { encodeSignalFrame } from '../../src/gateway/protocol.js';

/**
 * Live signals (mute, speaking, a reaction: docs/signaling.md "Live signals") side by side with
 * Socket.IO 4 emits to a room through its Redis adapter, like for like (bench/README.md,
 * `compare`): one sender on process A to the other members of a room of 4, and of 16, on process
 * B; nothing stored on either side, nothing acknowledged. Measured for each room size and system,
 * over the same repeated, alternated runs as the messages: copies delivered per second saturated,
 * the p99 of a copy at one common open-loop rate, and the CPU of the two server processes and
 * Redis per delivered copy.
 */

export const SIGNAL_ROOM_SIZES = [4, 16] as const;
export const GOAL_SIGNAL_FACTOR = 2;
export const GOAL_SIGNAL_CPU = 0.5;

type System = 'calling' | 'socketio';

interface SignalLeg {
  rate?: number;
  /** Copies delivered per second. */
  perSecond: number;
  /** Signals with every copy delivered, per second. */
  signalsPerSecond: number;
  errors: Record<string, number>;
  latency: Record<string, HistogramSummary>;
  /** CPU of A, B and Redis per delivered copy, µs. */
  cpuPerDeliveryUs: number;
  bound: string;
}

export interface RoomFigures {
  roomSize: number;
  rooms: number;
  common: number;
  saturated: Record<System, SignalLeg[]>;
  atCommon: Record<System, SignalLeg[]>;
}

/** One copy's floor: a bare uWebSockets.js app's CPU per frame sent (bench/ceilings/uwsFanout.ts). */
export interface SendFloor {
  bytes: number;
  sockets: number;
  sent: number;
  cpuPerSendUs: number;
}

export interface SignalsSection {
  floor: SendFloor;
  figures: RoomFigures[];
  markdown: string;
  headlines: Headline[];
  goals: Goal[];
  legs: [string, { errors: Record<string, number>; perSecond: number }][];
}

/** Runs every room size on the two systems' processes (already started by the compare scenario). */
export async function compareSignals(ctx: BenchContext, systems: Record<System, { a: ListeningProcess; b: ListeningProcess }>, order: readonly System[]): Promise<SignalsSection> {
  const floor = await measureSendFloor(ctx);
  const figures: RoomFigures[] = [];
  for (const roomSize of SIGNAL_ROOM_SIZES) figures.push(await measureRooms(ctx, systems, order, roomSize));
  return report(ctx, floor, figures);
}

/**
 * What one copy of a signal costs a server that does nothing else: a bare uWebSockets.js app
 * (bench/ceilings/uwsFanout.ts) sends a frame the size of the bench's signal frames to the 15
 * sockets of a room of 16, round after round, and counts its own CPU. Every design that writes
 * each copy to its socket pays this per copy on this machine (the system call and the loopback
 * delivery under it are most of it), so it bounds what any server's CPU per copy can come to.
 */
async function measureSendFloor(ctx: BenchContext): Promise<SendFloor> {
  const bytes = encodeSignalFrame('json', JSON.stringify({ callId: `scall-${ctx.tag}-16-000`, userId: `sig-${ctx.tag}-sender-000`, kind: 'custom', value: { key: 1_000_000, sentAtMs: nowMs() }, atMs: Date.now() })).length;
  const sockets = 15;
  const fanout = await startHelper('uws-fanout', 'bench/ceilings/uwsFanout.ts', {});
  ctx.track(fanout);
  const clients: WebSocket[] = [];
  try {
    for (let i = 0; i < sockets; i++) {
      const ws = new WebSocket(`${fanout.url.replace(/^http/, 'ws')}/ws`);
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('error', reject);
      });
      clients.push(ws);
    }
    const rounds = Math.max(200, Math.round(ctx.opts.sizes.compare.throughputMs * 2));
    const r = (await (await fetch(`${fanout.url}/fanout?rounds=${rounds}&bytes=${bytes}`)).json()) as { sent: number; cpuUs: number };
    const floor = { bytes, sockets, sent: r.sent, cpuPerSendUs: r.cpuUs / Math.max(1, r.sent) };
    ctx.log(`  the floor of a copy: a bare uWebSockets.js app sends a ${bytes}-byte frame to each of ${sockets} sockets for ${floor.cpuPerSendUs.toFixed(1)} µs of its CPU per send (${fmtNum(r.sent)} sends)`);
    return floor;
  } finally {
    for (const ws of clients) ws.terminate();
    await ctx.stopServer(fanout);
  }
}

async function measureRooms(ctx: BenchContext, systems: Record<System, { a: ListeningProcess; b: ListeningProcess }>, order: readonly System[], roomSize: number): Promise<RoomFigures> {
  const z = ctx.opts.sizes.compare;
  const gens = ctx.opts.generators;
  // About as many sockets as the messages' pairs: `pairs` members in rooms of `roomSize`.
  const rooms = Math.max(1, Math.ceil(z.pairs / roomSize / gens));
  const pools = {} as Record<System, GeneratorPool>;
  try {
    for (const system of order) {
      pools[system] = await GeneratorPool.start(gens, 'signals', (i) => ({
        system,
        aUrl: systems[system].a.url,
        bUrl: systems[system].b.url,
        secret: ctx.secret,
        tag: `${ctx.tag}${system[0]}${roomSize}`,
        gen: i,
        rooms,
        roomSize,
        localAddresses: ctx.localAddresses(rooms * roomSize * gens, system === 'calling' ? 5 : 6),
      }) satisfies SignalsSetup);
    }
    ctx.log(`  signals, rooms of ${roomSize}: ${fmtNum(rooms * gens)} rooms per system (a sender on A, ${roomSize - 1} members on B each)`);
    const measure = (system: System, run: { mode: 'closed' } | { mode: 'open'; rate: number }) => measureLeg(ctx, system, systems[system], pools[system], roomSize, run);
    const rounds = Array.from({ length: Math.max(1, z.repeats) }, (_, r) => (r % 2 === 0 ? order : [...order].reverse()));
    const saturated: Record<System, SignalLeg[]> = { calling: [], socketio: [] };
    for (const round of rounds) for (const system of round) saturated[system].push(await measure(system, { mode: 'closed' }));
    // One common rate of signals both sustain: half the slower one's median saturated rate.
    const common = Math.max(20, Math.round(Math.min(...order.map((s) => spreadOf(saturated[s].map((l) => l.signalsPerSecond)).median)) / 2));
    const atCommon: Record<System, SignalLeg[]> = { calling: [], socketio: [] };
    for (const round of rounds) for (const system of round) atCommon[system].push(await measure(system, { mode: 'open', rate: common }));
    return { roomSize, rooms: rooms * gens, common, saturated, atCommon };
  } finally {
    for (const p of Object.values(pools)) await p.close();
  }
}

async function measureLeg(
  ctx: BenchContext,
  system: System,
  d: { a: ListeningProcess; b: ListeningProcess },
  pool: GeneratorPool,
  roomSize: number,
  run: { mode: 'closed' } | { mode: 'open'; rate: number },
): Promise<SignalLeg> {
  const z = ctx.opts.sizes.compare;
  const durationMs = run.mode === 'closed' ? z.throughputMs : z.latencyMs;
  const servers = { [`${system} A`]: d.a.pid, [`${system} B`]: d.b.pid };
  const stop = await ctx.cpuWindow({ ...servers, ...Object.fromEntries(pool.pids().map((p, i) => [`generator ${i}`, p])) });
  const t0 = nowMs();
  const outs = await pool.run<SignalsResult>(() => ({
    ...(run.mode === 'closed' ? { mode: 'closed' as const, concurrency: Math.ceil(z.concurrency / pool.size) } : { mode: 'open' as const, rate: run.rate / pool.size }),
    durationMs,
    startAtMs: nowMs() + 200,
    timeoutMs: 5000,
  }) satisfies SignalsRun);
  const cpu = await stop();
  const wallS = (nowMs() - t0) / 1000;
  const gen = generatorCpu(outs);
  const deliveries = outs.reduce((a, o) => a + o.result.deliveries, 0);
  const done = outs.reduce((a, o) => a + o.result.done, 0);
  const leg: SignalLeg = {
    ...(run.mode === 'open' ? { rate: run.rate } : {}),
    perSecond: (done * (roomSize - 1) * 1000) / durationMs,
    signalsPerSecond: (done * 1000) / durationMs,
    errors: Object.fromEntries(outs.flatMap((o) => Object.entries(o.result.errors)).reduce((m, [k, v]) => m.set(k, (m.get(k) ?? 0) + v), new Map<string, number>())),
    latency: mergeHists(outs.map((o) => o.result.hist)),
    cpuPerDeliveryUs: (serverAndRedis(cpu, Object.keys(servers)) * wallS * 1e6) / Math.max(1, deliveries),
    bound: describeBound(cpu, gen.bound, gen.maxShare),
  };
  const l = leg.latency[DELIVERY];
  ctx.log(
    `  ${system} signals to rooms of ${roomSize} ${run.mode === 'closed' ? `saturated (${z.concurrency} in flight)` : `at ${fmtRate(run.rate)}`}: ${fmtRate(leg.signalsPerSecond)} signals, ${fmtRate(leg.perSecond)} copies, ` +
      `p50 ${fmtMs(l?.p50 ?? NaN)} p99 ${fmtMs(l?.p99 ?? NaN)}, ${leg.cpuPerDeliveryUs.toFixed(1)} µs CPU per copy, errors ${errorList(leg.errors)}; ${leg.bound}`,
  );
  return leg;
}

/** The run with the median rate of copies. */
function medianLeg(legs: readonly SignalLeg[]): SignalLeg {
  return [...legs].sort((a, b) => a.perSecond - b.perSecond)[Math.floor((legs.length - 1) / 2)]!;
}

/** Cores used by the two server processes and Redis over the window. */
function serverAndRedis(cpu: CpuShares, servers: readonly string[]): number {
  return servers.reduce((a, k) => a + (cpu.processes[k] ?? 0), 0) + (cpu.processes.redis ?? 0);
}

function report(ctx: BenchContext, floor: SendFloor, figures: RoomFigures[]): SignalsSection {
  const runs = Math.max(1, ctx.opts.sizes.compare.repeats);
  const p99 = (l: SignalLeg) => l.latency[DELIVERY]?.p99 ?? NaN;
  const per = figures.map((f) => {
    const sat = { calling: spreadOf(f.saturated.calling.map((l) => l.perSecond)), socketio: spreadOf(f.saturated.socketio.map((l) => l.perSecond)) };
    const tail = { calling: spreadOf(f.atCommon.calling.map(p99)), socketio: spreadOf(f.atCommon.socketio.map(p99)) };
    const cpu = { calling: spreadOf(f.saturated.calling.map((l) => l.cpuPerDeliveryUs)), socketio: spreadOf(f.saturated.socketio.map((l) => l.cpuPerDeliveryUs)) };
    const clean = [...f.saturated.calling, ...f.atCommon.calling].every((l) => Object.keys(l.errors).length === 0);
    return { f, sat, tail, cpu, clean, factor: sat.calling.median / Math.max(1e-9, sat.socketio.median), cpuRatio: cpu.calling.median / Math.max(1e-9, cpu.socketio.median) };
  });
  const conclusive = (a: Spread, b: Spread) => (verdict(a, b) === 'inconclusive' ? 'no: the runs overlap' : 'yes');
  const rows = per.flatMap((p) => [
    [`rooms of ${p.f.roomSize}: copies/s saturated`, fmtSpread(p.sat.calling, 0), fmtSpread(p.sat.socketio, 0), `${p.factor.toFixed(2)}×`, conclusive(p.sat.calling, p.sat.socketio)],
    [`rooms of ${p.f.roomSize}: p99 ms at ${fmtRate(p.f.common)} signals`, fmtSpread(p.tail.calling, 2), fmtSpread(p.tail.socketio, 2), `${(p.tail.calling.median / p.tail.socketio.median).toFixed(2)}×`, conclusive(p.tail.calling, p.tail.socketio)],
    [`rooms of ${p.f.roomSize}: µs CPU per copy (A + B + Redis, saturated)`, fmtSpread(p.cpu.calling, 1), fmtSpread(p.cpu.socketio, 1), `${p.cpuRatio.toFixed(2)}×`, conclusive(p.cpu.calling, p.cpu.socketio)],
  ]);
  const each = (f: (p: (typeof per)[number]) => string) => per.map((p) => `rooms of ${p.f.roomSize}: ${f(p)}`).join('; ');
  const markdown = [
    '### Live signals vs Socket.IO room emits',
    '',
    `One sender's socket on process A, the other members' on process B, through the same Redis; nothing stored, nothing acknowledged on either side. ` +
      `**calling-backend**: each room is a group call every member joined; a \`signal\` frame (kind \`custom\`, \`{key, sentAtMs}\`) → lua/sendSignals.lua, once for the signals gateway A received in one turn (each: sender joined? through the call's signal view; the call's limit), with one publication on an early channel naming each signal's recipients → gateway B → \`signal\` frame. ` +
      `**Socket.IO 4 + @socket.io/redis-adapter**: each member's socket joins room \`call:<id>\`; \`emit('signal', {room, value})\` → \`socket.to(room).emit()\` → adapter PUBLISH → B. ` +
      `A signal counts once every copy arrived; each copy's latency is timed from the send (in the open loop, the scheduled send). Each leg ran ${runs} time(s), the systems alternated; median (lowest–highest):`,
    '',
    mdTable(['', 'calling-backend', 'Socket.IO', 'ratio of medians', 'conclusive?'], rows),
    '',
    `**The floor of a copy.** A bare uWebSockets.js app (\`bench/ceilings/uwsFanout.ts\`) that only sends a ${floor.bytes}-byte frame to each of ${floor.sockets} sockets uses ` +
      `**${floor.cpuPerSendUs.toFixed(1)} µs** of its CPU per send on this machine (${fmtNum(floor.sent)} sends; the system call and the loopback delivery under it are most of it). ` +
      `Every server that writes each copy to its socket pays at least this per copy, before reading, checking or routing anything. ` +
      `The CPU goal (≤ ${GOAL_SIGNAL_CPU}× Socket.IO's) allows ${each((p) => `${(GOAL_SIGNAL_CPU * p.cpu.socketio.median).toFixed(1)} µs per copy (${((GOAL_SIGNAL_CPU * p.cpu.socketio.median) / floor.cpuPerSendUs).toFixed(2)}× the floor)`)}; ` +
      `ours uses ${each((p) => `${(p.cpu.calling.median / floor.cpuPerSendUs).toFixed(2)}× the floor`)}.`,
  ].join('\n');
  const atGoalSize = ctx.opts.sizes.mode !== 'smoke';
  const goals: Goal[] = [
    {
      goal: `live signals delivered per second, saturated, ≥ ${GOAL_SIGNAL_FACTOR}× Socket.IO's room emits (rooms of ${SIGNAL_ROOM_SIZES.join(' and ')}), with no errors`,
      target: `≥ ${GOAL_SIGNAL_FACTOR}×`,
      measured: each((p) => `${p.factor.toFixed(2)}× (${fmtRate(p.sat.calling.median)} vs ${fmtRate(p.sat.socketio.median)} copies)`),
      status: per.every((p) => p.factor >= GOAL_SIGNAL_FACTOR && p.clean) ? 'MET' : 'MISSED',
      atGoalSize,
      note: each((p) => `ours ${medianLeg(p.f.saturated.calling).bound}; Socket.IO ${medianLeg(p.f.saturated.socketio).bound}`),
    },
    {
      goal: 'live signal p99 at a common open-loop rate at most Socket.IO’s',
      target: "p99 ≤ Socket.IO's",
      measured: each((p) => `${fmtMs(p.tail.calling.median)} vs ${fmtMs(p.tail.socketio.median)} at ${fmtRate(p.f.common)}`),
      status: per.every((p) => p.tail.calling.median <= p.tail.socketio.median && p.clean) ? 'MET' : 'MISSED',
      atGoalSize,
      note: `${runs} run(s) per system; ${each((p) => (verdict(p.tail.calling, p.tail.socketio) === 'inconclusive' ? 'the runs overlap' : `ours ${verdict(p.tail.calling, p.tail.socketio)}`))}`,
    },
    {
      goal: `server and Redis CPU per delivered signal ≤ ${GOAL_SIGNAL_CPU}× Socket.IO's`,
      target: `≤ ${GOAL_SIGNAL_CPU}×`,
      measured: each((p) => `${p.cpuRatio.toFixed(2)}× (${p.cpu.calling.median.toFixed(1)} vs ${p.cpu.socketio.median.toFixed(1)} µs)`),
      status: per.every((p) => p.cpuRatio <= GOAL_SIGNAL_CPU) ? 'MET' : 'MISSED',
      atGoalSize,
      note: `CPU of both server processes and Redis over the saturated runs, divided by the copies delivered; the floor of one send alone is ${floor.cpuPerSendUs.toFixed(1)} µs (bench/ceilings/uwsFanout.ts)`,
    },
  ];
  const headlines: Headline[] = per.map((p) => ({
    metric: `live signal copies/s to rooms of ${p.f.roomSize} (saturated): ours vs Socket.IO`,
    value: `${fmtRate(p.sat.calling.median)} vs ${fmtRate(p.sat.socketio.median)} (${p.factor.toFixed(2)}×; medians of ${runs} runs)`,
    ceiling: 'Socket.IO (same run)',
    ratio: `${p.factor.toFixed(2)}×`,
  }));
  const legs = figures.flatMap((f) =>
    (['calling', 'socketio'] as const).flatMap((s) => [
      ...f.saturated[s].map((l, i): [string, SignalLeg] => [`${s} signals, rooms of ${f.roomSize}, saturated run ${i + 1}`, l]),
      ...f.atCommon[s].map((l, i): [string, SignalLeg] => [`${s} signals, rooms of ${f.roomSize}, at ${f.common}/s run ${i + 1}`, l]),
    ]),
  );
  return { floor, figures, markdown, headlines, goals, legs };
}
