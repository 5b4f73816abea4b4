import { openFilesLimit } from '../lib/procstat.js';
import type { BenchContext } from '../lib/context.js';
import { invalidReasons } from '../lib/validity.js';
import { GeneratorPool } from '../lib/generators.js';
import { settledMemory, startHelper, type ListeningProcess, type SettledMemory } from '../lib/processes.js';
import { sleep } from '../lib/clock.js';
import { errorList, fmtBytes, fmtNum, fmtRate, mdTable, ratio, type Goal, type ScenarioResult } from '../lib/report.js';
import type { IdleRun, IdleSetup } from '../workers/idle.js';

/**
 * Idle connections: N authenticated signaling sockets (each its own user) held open, and the
 * server memory each costs (RSS after − RSS before, over N), next to the raw uWebSockets.js
 * floor (bare sockets on a minimal app). One process can hold only as many sockets as its open
 * files limit allows (`ulimit -n`, which a process cannot raise), so above that the sockets are
 * spread over several gateway processes (ROLES=gateway) and several generators.
 */

export const GOAL_IDLE_SOCKETS = 100_000;
export const GOAL_BYTES_PER_SOCKET = 1.5 * 1024;
/** Sockets per process, under the open files limit with room for Redis connections and the like. */
const PER_PROCESS = 18_000;

interface Measured {
  opened: number;
  heldOpen: number;
  closedDuringHold: number;
  connectMs: number;
  errors: Record<string, number>;
  rssDelta: number | undefined;
  /** The figure used: RSS growth over all sockets / their number (raw: only when above noise). */
  perSocket: number | undefined;
  /** RSS growth over all sockets / their number. */
  averagePerSocket: number | undefined;
  /** Cross-check: RSS growth over the second half of the sockets / their number. */
  marginalPerSocket: number | undefined;
  /** Live JavaScript heap (after full GC) growth / sockets: the gateway's JS state per socket. */
  heapPerSocket: number | undefined;
  redisPerSocket: number;
  processes: number;
}

export async function idleScenario(ctx: BenchContext): Promise<ScenarioResult> {
  const z = ctx.opts.sizes.idle;
  const n = z.sockets;
  const procs = Math.ceil(n / PER_PROCESS);
  const openFiles = await openFilesLimit();
  ctx.log(`  open files limit (ulimit -n) ${openFiles}: ${fmtNum(n)} sockets over ${procs} server process(es) and ${Math.max(ctx.opts.generators, procs)} generator(s), source addresses ${ctx.localAddresses(n, 1).join(', ')} (raw: ${ctx.localAddresses(n, 2).join(', ')})`);

  const ours = await measure(ctx, 'signaling', n, procs, z.holdMs);
  if (ours.perSocket !== undefined) ctx.findings.idleBytesPerSocket = ours.perSocket;
  ctx.log(`  signaling: ${fmtNum(ours.heldOpen)}/${fmtNum(n)} held, ${ours.perSocket !== undefined ? fmtBytes(ours.perSocket) : 'n/a'} server RSS per socket (JS heap ${ours.heapPerSocket !== undefined ? fmtBytes(ours.heapPerSocket) : 'n/a'}), Redis ${fmtBytes(ours.redisPerSocket)} per socket`);
  let raw: Measured | undefined;
  if (ctx.selfHosted) {
    raw = await measure(ctx, 'raw', n, procs, Math.min(z.holdMs, 2000));
    // The raw app keeps nothing per socket in JavaScript (no heap slack to cancel) and its
    // per-socket memory is small next to RSS noise: its floor is the average over all sockets.
    // Below RSS noise (a few MB over a few thousand sockets) it reads as ≤ 0: then it is unknown.
    raw.perSocket = raw.averagePerSocket !== undefined && raw.averagePerSocket > 0 ? raw.averagePerSocket : undefined;
    if (raw.perSocket !== undefined) ctx.ceilings.rawWsBytesPerSocket = raw.perSocket;
    ctx.log(`  raw uWS: ${fmtNum(raw.heldOpen)} held, ${raw.perSocket !== undefined ? fmtBytes(raw.perSocket) : `below RSS noise (${fmtBytes(raw.averagePerSocket ?? NaN)})`} RSS per socket`);
  }

  const atGoalSize = n >= GOAL_IDLE_SOCKETS && ours.heldOpen >= GOAL_IDLE_SOCKETS;
  const goal: Goal = {
    goal: `< 1.5 KB server memory per idle authenticated socket with ${fmtNum(GOAL_IDLE_SOCKETS)} held`,
    target: '< 1.5 KB',
    measured: ours.perSocket !== undefined ? `${fmtBytes(ours.perSocket)} per socket with ${fmtNum(ours.heldOpen)} held (+ Redis ${fmtBytes(ours.redisPerSocket)})` : 'server RSS not readable (remote target)',
    status: ours.perSocket === undefined ? 'NOT MEASURED' : ours.perSocket < GOAL_BYTES_PER_SOCKET && ours.heldOpen === n ? 'MET' : 'MISSED',
    atGoalSize,
    note: `${atGoalSize ? '' : `At ${fmtNum(n)} sockets the one-time growth weighs in: an upper bound (JS heap per socket: ${ours.heapPerSocket !== undefined ? fmtBytes(ours.heapPerSocket) : 'n/a'}). `}${bound(ours, raw)}`,
  };
  const md = [
    `${fmtNum(n)} signaling sockets, each its own user with its own session token, opened over ${ctx.localAddresses(n, 1).length} loopback source address(es) ` +
      `(${ctx.localAddresses(n, 1).join(', ')}) and held for ${z.holdMs / 1000} s. Open files limit here: ${openFiles} (a process cannot raise it), so ` +
      `sockets are spread over ${procs} gateway process(es) (ROLES=gateway, fresh) of at most ${fmtNum(PER_PROCESS)} each. Memory per socket = ` +
      `(server memory holding all sockets − before connecting) / sockets, summed over the gateway processes, each read after full GCs, where memory is RSS less ` +
      `the V8 heap's committed-but-free pages (heapTotal − heapUsed: plain RSS swings by tens of MB as V8 grows or returns heap pages). `+
      `Before the baseline, 10 % as many sockets are opened and closed, so one-time growth (code, heap sizing) is not counted; what remains of it weighs on ` +
      `a small run, so a quick run's figure is an upper bound. Beside it: the live JavaScript heap per ` +
      `socket (V8 heapUsed after full GC: the gateway's JS state, exact), and the RSS growth over the second half of the sockets only (a noisy cross-check). ` +
      `Redis memory per socket from INFO used_memory (one live-channel subscription per user).`,
    '',
    mdTable(
      ['', 'sockets opened', 'still open after hold', 'connect rate', 'server RSS per socket', 'of which JS heap', 'RSS, second half only', 'Redis per socket', 'errors'],
      [
        row('calling-backend signaling (authenticated)', ours),
        ...(raw ? [row('raw uWebSockets.js (no auth, no state) — the floor', raw)] : []),
      ],
    ),
    '',
    `Ratio to the raw uWS floor: ${ours.perSocket !== undefined && raw?.perSocket ? ratio(ours.perSocket, raw.perSocket) : 'n/a'}.`,
    '',
    `Bound: ${bound(ours, raw)}`,
  ].join('\n');
  return {
    id: 'idle',
    title: 'Idle connections',
    headlines: [
      {
        metric: `server memory per idle socket (${fmtNum(ours.heldOpen)} held)`,
        value: ours.perSocket !== undefined ? fmtBytes(ours.perSocket) : 'n/a',
        ceiling: raw?.perSocket !== undefined ? `raw uWS ${fmtBytes(raw.perSocket)}` : raw ? 'raw uWS: below RSS noise' : 'n/a',
        ratio: ours.perSocket !== undefined && raw?.perSocket ? ratio(ours.perSocket, raw.perSocket) : raw ? 'n/a (floor not resolvable at this size)' : 'n/a',
        bound: bound(ours, raw),
      },
      {
        metric: 'authenticated sockets opened/s',
        value: fmtRate((ours.opened * 1000) / ours.connectMs),
        ceiling: raw ? `raw uWS ${fmtRate((raw.opened * 1000) / raw.connectMs)}` : 'n/a',
        ratio: raw ? ratio(ours.opened / ours.connectMs, raw.opened / raw.connectMs) : 'n/a',
      },
    ],
    goals: [goal],
    markdown: md,
    data: { ours, raw, openFiles, processes: procs },
    invalid: invalidReasons({
      errors: [{ where: 'our sockets', errors: ours.errors }, ...(raw ? [{ where: 'the raw uWS sockets', errors: raw.errors }] : [])],
      nonZero: [{ what: 'sockets held open', n: ours.heldOpen }],
    }),
  };
}

function row(label: string, m: Measured): string[] {
  return [
    label,
    fmtNum(m.opened),
    `${fmtNum(m.heldOpen)}${m.closedDuringHold ? ` (${m.closedDuringHold} closed)` : ''}`,
    fmtRate((m.opened * 1000) / m.connectMs),
    m.perSocket !== undefined ? fmtBytes(m.perSocket) : m.averagePerSocket !== undefined ? `below RSS noise (${fmtBytes(m.averagePerSocket)})` : 'n/a',
    m.heapPerSocket !== undefined ? fmtBytes(m.heapPerSocket) : 'n/a',
    m.marginalPerSocket !== undefined ? fmtBytes(m.marginalPerSocket) : 'n/a',
    fmtBytes(m.redisPerSocket),
    errorList(m.errors),
  ];
}

function bound(ours: Measured, raw: Measured | undefined): string {
  if (ours.perSocket === undefined) return 'not measurable against a remote server';
  const floor = raw?.perSocket;
  if (raw && floor === undefined) {
    return `uWS itself needs less per socket than this run can resolve (raw sockets grew RSS by ${fmtBytes(raw.averagePerSocket ?? NaN)} per socket: within RSS noise); ` +
      `so practically all of the ${fmtBytes(ours.perSocket)} is the gateway's: ${ours.heapPerSocket !== undefined ? `${fmtBytes(ours.heapPerSocket)} of live JavaScript heap ` : ''}` +
      `(SocketData object, Set entries, the per-user live subscription entry and its channel string, ioredis's subscription bookkeeping) plus allocator and heap slack`;
  }
  const extra = floor !== undefined ? ours.perSocket - floor : undefined;
  return (
    `uWS itself needs ${floor !== undefined ? fmtBytes(floor) : 'n/a'} per socket (kernel socket buffers are not in RSS); ` +
    `the rest (${extra !== undefined ? fmtBytes(extra) : 'n/a'}) is the gateway's: ${ours.heapPerSocket !== undefined ? `${fmtBytes(ours.heapPerSocket)} of live JavaScript heap ` : ''}` +
    `(SocketData object, Set entries, the per-user live subscription entry and its channel string, ioredis's subscription bookkeeping) plus allocator and heap slack`
  );
}

async function measure(ctx: BenchContext, mode: 'signaling' | 'raw', n: number, procs: number, holdMs: number): Promise<Measured> {
  let servers: ListeningProcess[] = [];
  let targets: string[];
  if (ctx.selfHosted) {
    servers = await Promise.all(
      Array.from({ length: procs }, (_, i) =>
        mode === 'signaling'
          ? ctx.startServer(`gateway-idle-${i}`, { ROLES: 'gateway', WS_IDLE_TIMEOUT_S: '120' })
          : startHelper(`uws-raw-${i}`, 'bench/ceilings/uwsHello.ts', {}).then((p) => (ctx.track(p), p)),
      ),
    );
    targets = servers.map((s) => s.url.replace(/^http/, 'ws'));
  } else {
    targets = [ctx.main.wsBase];
  }
  const gens = Math.max(ctx.opts.generators, procs);
  const addresses = ctx.localAddresses(n, mode === 'signaling' ? 1 : 2);
  const pool = await GeneratorPool.start(gens, 'idle', (i) => ({
    mode,
    targets,
    secret: ctx.secret,
    tag: `${ctx.tag}${mode[0]}`,
    gen: i,
    count: countFor(i, n, gens),
    // Each generator starts on a different address so the ports spread evenly.
    localAddresses: addresses.map((_, k) => addresses[(k + i) % addresses.length]!),
  }) satisfies IdleSetup);
  try {
    // Warm-up: open and close some sockets first, so one-time growth (code, heap sizing) lands
    // in the baseline rather than in the per-socket figure.
    await pool.run(() => ({ op: 'warm', count: Math.max(200, Math.floor(n / gens / 10)), concurrency: 100 }) satisfies IdleRun);
    await sleep(1000);
    const sum = async () => {
      const all = (await Promise.all(servers.map((s) => settledMemory(s.pid)))).filter((m): m is SettledMemory => m !== undefined);
      return { rss: all.reduce((a, m) => a + m.retained, 0), heap: all.reduce((a, m) => a + m.heapUsed, 0) };
    };
    const before = await sum();
    const redisBefore = (await ctx.redisInfo()).usedMemory;
    const t0 = performance.now();
    type Connect = { opened: number; errors: Record<string, number>; ms: number };
    // Two halves: the RSS growth over the second half is a cross-check (marginal cost).
    const half = await pool.run<Connect>((i) => ({ op: 'connect', concurrency: 100, count: Math.floor(countFor(i, n, gens) / 2) }) satisfies IdleRun);
    const atHalf = await sum();
    const t1 = performance.now();
    const rest = await pool.run<Connect>(() => ({ op: 'connect', concurrency: 100 }) satisfies IdleRun);
    const connectMs = performance.now() - t1 + (t1 - t0);
    const openedHalf = half.reduce((a, c) => a + c.result.opened, 0);
    const opened = openedHalf + rest.reduce((a, c) => a + c.result.opened, 0);
    ctx.log(`    ${mode}: ${fmtNum(opened)} sockets open in ${(connectMs / 1000).toFixed(1)} s; holding ${holdMs / 1000} s`);
    const holds = await pool.run<{ open: number; closedDuringHold: number }>(() => ({ op: 'hold', ms: holdMs }) satisfies IdleRun);
    const after = await sum();
    const redisAfter = (await ctx.redisInfo()).usedMemory;
    const heldOpen = holds.reduce((a, h) => a + h.result.open, 0);
    const errors: Record<string, number> = {};
    for (const c of [...half, ...rest]) for (const [k, v] of Object.entries(c.result.errors)) errors[k] = (errors[k] ?? 0) + v;
    const measurable = servers.length > 0;
    await pool.run(() => ({ op: 'close' }) satisfies IdleRun);
    return {
      opened,
      heldOpen,
      closedDuringHold: holds.reduce((a, h) => a + h.result.closedDuringHold, 0),
      connectMs,
      errors,
      rssDelta: measurable ? after.rss - before.rss : undefined,
      perSocket: measurable && opened > 0 ? (after.rss - before.rss) / opened : undefined,
      averagePerSocket: measurable && opened > 0 ? (after.rss - before.rss) / opened : undefined,
      marginalPerSocket: measurable && opened - openedHalf > 0 ? (after.rss - atHalf.rss) / (opened - openedHalf) : undefined,
      heapPerSocket: measurable && opened > 0 && Number.isFinite(after.heap - before.heap) ? (after.heap - before.heap) / opened : undefined,
      redisPerSocket: opened > 0 ? (redisAfter - redisBefore) / opened : 0,
      processes: servers.length,
    };
  } finally {
    // Servers first, so the TIME_WAIT ports are theirs, not the generators' source ports.
    await Promise.all(servers.map((s) => ctx.stopServer(s)));
    await pool.close();
  }
}

function countFor(gen: number, n: number, gens: number): number {
  return Math.floor(n / gens) + (gen < n % gens ? 1 : 0);
}
