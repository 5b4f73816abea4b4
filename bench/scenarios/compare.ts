import type { BenchContext, CpuShares } from '../lib/context.js';
import { invalidReasons } from '../lib/validity.js';
import { mergeHists } from '../lib/context.js';
import { GeneratorPool, generatorCpu } from '../lib/generators.js';
import type { HistogramSummary } from '../lib/histogram.js';
import { settledRss, startHelper, type ListeningProcess } from '../lib/processes.js';
import { nowMs, sleep } from '../lib/clock.js';
import { errorList, fmtBytes, fmtMs, fmtNum, fmtRate, mdTable, ratio, type ScenarioResult } from '../lib/report.js';
import { DELIVERY, PAYLOAD_BYTES, type DeliveryKind, type DeliveryResult, type DeliveryRun, type DeliverySetup } from '../workers/delivery.js';
import { describeBound } from './callSteps.js';
import { fmtSpread, spreadOf, verdict } from '../lib/spread.js';
import { compareSignals, type SignalsSection } from './compareSignals.js';

/**
 * In-call messages socket to socket, side by side with the usual alternative (bench/README.md,
 * `compare`): pairs of users, the caller's device on process A and the callee's on process B;
 * the caller sends a small signaling message (an ICE candidate) that must reach the callee's
 * socket through Redis, on the calling backend's real path and on Socket.IO 4 + its Redis
 * adapter. Measured for each: saturation throughput (closed loop, same concurrency), latency at
 * one common open-loop rate both carry, and memory per connection on B. The calling backend's
 * durable event path (a rename: HTTP on A → event log → socket on B) is a second row, on the
 * same pairs.
 */

export const GOAL_DELIVERY_FACTOR = 2;

/**
 * The calling processes' abuse limits, raised for the bench: a pair here sends dozens of
 * messages and renames a second, where the defaults allow a person 100 messages per call and 50
 * frames per socket per 10 s, 30 renames a minute and 10 per call (docs/configuration.md). The
 * limiters still run, so their cost is measured. Socket.IO has no such limits.
 */
export const COMPARE_LIMITS: Record<string, string> = {
  RATE_CALL_MESSAGES_PER_10S: '100000000',
  RATE_WS_MESSAGES_PER_10S: '100000000',
  RATE_RENAMES_PER_MIN: '100000000',
  RATE_CALL_SIGNALS_PER_S: '100000000',
  // Its maximum: a quick run renames each call about 15 times.
  RENAMES_PER_CALL: '1000',
};

type System = 'calling' | 'socketio';

/** One measured run: closed loop (saturated) or open loop at `rate`. */
interface Leg {
  rate?: number;
  perSecond: number;
  errors: Record<string, number>;
  latency: Record<string, HistogramSummary>;
  cpu: CpuShares;
  bound: string;
  generatorBound: boolean;
}

/** One row of the comparison. `ours` and `socketio` keep this shape for the HTML report (bench/lib/htmlReport.ts). */
interface RowFigures {
  system: System;
  kind: DeliveryKind;
  /** Sockets on process B. */
  sockets: number;
  bytesPerSocket: number | undefined;
  throughput: Leg;
  latency?: Leg & { rate: number };
}

interface Deployment {
  a: ListeningProcess;
  b: ListeningProcess;
  pool?: GeneratorPool;
  sockets?: number;
  bytesPerSocket?: number | undefined;
}

export async function compareScenario(ctx: BenchContext): Promise<ScenarioResult> {
  if (!ctx.selfHosted) {
    return { id: 'compare', title: 'In-call messages vs Socket.IO', headlines: [], goals: [], markdown: 'Not run: targeting an existing deployment (the comparison starts its own processes).', data: null };
  }
  const prefix = `cmp${ctx.tag}`;
  // Two processes per system. Ours: the callers' gateway, the API and the relay on A; the
  // callees' gateway alone on B.
  const [ca, cb, sa, sb] = await Promise.all([
    ctx.startServer('calling-A', { ...COMPARE_LIMITS, ROLES: 'api,gateway,worker', REDIS_PREFIX: prefix }),
    ctx.startServer('calling-B', { ...COMPARE_LIMITS, ROLES: 'gateway', REDIS_PREFIX: prefix }),
    startSio(ctx, 'socketio-A', prefix),
    startSio(ctx, 'socketio-B', prefix),
  ]);
  const systems: Record<System, Deployment> = { calling: { a: ca, b: cb }, socketio: { a: sa, b: sb } };
  const order: System[] = ['socketio', 'calling'];
  try {
    if (ctx.opts.sizes.compare.messages === 0) return signalsAlone(await compareSignals(ctx, systems, order));
    for (const system of order) await connect(ctx, system, systems[system]);
    const measure = (system: System, kind: DeliveryKind, run: { mode: 'closed' } | { mode: 'open'; rate: number }) => measureLeg(ctx, system, systems[system], kind, run);
    // Each leg `repeats` times, the systems alternated (socketio, calling, then calling, socketio, …),
    // so a drift of the machine weighs on both: one run of each says little here.
    const rounds = Array.from({ length: Math.max(1, ctx.opts.sizes.compare.repeats) }, (_, r) => (r % 2 === 0 ? order : [...order].reverse()));
    const saturated: Record<System, Leg[]> = { calling: [], socketio: [] };
    for (const round of rounds) for (const system of round) saturated[system].push(await measure(system, 'message', { mode: 'closed' }));
    // Latency at one open-loop rate both sustain: half the slower one's median saturated rate.
    const common = Math.max(50, Math.round(Math.min(...order.map((s) => spreadOf(saturated[s].map((l) => l.perSecond)).median)) / 2));
    const atCommon: Record<System, Leg[]> = { calling: [], socketio: [] };
    for (const round of rounds) for (const system of round) atCommon[system].push(await measure(system, 'message', { mode: 'open', rate: common }));
    const row = (system: System, kind: DeliveryKind, throughput: Leg, latency: Leg): RowFigures => ({
      system,
      kind,
      sockets: systems[system].sockets!,
      bytesPerSocket: systems[system].bytesPerSocket,
      throughput,
      latency: { ...latency, rate: latency.rate! },
    });
    // The table's row of each system: its median runs (saturated, and p99 at the common rate).
    const rows = {} as Record<System, RowFigures>;
    for (const system of order) rows[system] = row(system, 'message', medianRun(saturated[system], (l) => l.perSecond), medianRun(atCommon[system], p99Of));
    const repeated: Repeated = {
      saturated: { calling: saturated.calling.map((l) => l.perSecond), socketio: saturated.socketio.map((l) => l.perSecond) },
      p99: { calling: atCommon.calling.map(p99Of), socketio: atCommon.socketio.map(p99Of) },
    };
    // The durable path, on the same pairs: at the common rate, or half its own saturated rate when lower.
    const renameSaturated = await measure('calling', 'rename', { mode: 'closed' });
    const renameRate = Math.max(10, Math.min(common, Math.round(renameSaturated.perSecond / 2)));
    const rename = row('calling', 'rename', renameSaturated, await measure('calling', 'rename', { mode: 'open', rate: renameRate }));
    // Live signals, on the same processes (the pairs' sockets stay connected, idle).
    const signals = await compareSignals(ctx, systems, order);
    const legs: [string, { errors: Record<string, number>; perSecond: number }][] = [
      ...order.flatMap((s) => saturated[s].map((l, i): [string, Leg] => [`${s} saturated run ${i + 1}`, l])),
      ...order.flatMap((s) => atCommon[s].map((l, i): [string, Leg] => [`${s} at ${common}/s run ${i + 1}`, l])),
      ['calling renames saturated', renameSaturated],
      ['calling renames at the common rate', rename.latency!],
      ...signals.legs,
    ];
    return { ...report(ctx, rows.calling, rows.socketio, rename, repeated, signals), invalid: invalidLegs(legs) };
  } finally {
    for (const s of Object.values(systems)) {
      await s.pool?.close();
      await Promise.all([ctx.stopServer(s.a), ctx.stopServer(s.b)]);
    }
  }
}

/** The live signals without the messages and renames (`--set compare.messages=0`). */
function signalsAlone(signals: SignalsSection): ScenarioResult {
  return { id: 'compare', title: 'Live signals vs Socket.IO 4 + Redis adapter (messages not run: compare.messages=0)', headlines: signals.headlines, goals: signals.goals, markdown: signals.markdown, data: { signals: signals.figures, sendFloor: signals.floor }, invalid: invalidLegs(signals.legs) };
}

/** Why the run is invalid: a leg with errors, or one that delivered nothing. */
function invalidLegs(legs: readonly [string, { errors: Record<string, number>; perSecond: number }][]) {
  return invalidReasons({ errors: legs.map(([where, l]) => ({ where, errors: l.errors })), nonZero: legs.map(([what, l]) => ({ what: `${what}: deliveries/s`, n: l.perSecond })) });
}

/** Each system's figures over the repeated runs: saturated deliveries/s, and p99 (ms) at the common rate. */
interface Repeated {
  saturated: Record<System, number[]>;
  p99: Record<System, number[]>;
}

const p99Of = (l: Leg): number => l.latency[DELIVERY]?.p99 ?? NaN;

/** The run whose `figure` is the median (the lower middle of an even count). */
function medianRun(legs: readonly Leg[], figure: (l: Leg) => number): Leg {
  const sorted = [...legs].sort((a, b) => figure(a) - figure(b));
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

/** Starts the system's generators (pairs, calls, sockets) and reads the memory they cost B. */
async function connect(ctx: BenchContext, system: System, d: Deployment): Promise<void> {
  const z = ctx.opts.sizes.compare;
  const gens = ctx.opts.generators;
  const pairs = Math.ceil(z.pairs / gens);
  await sleep(500);
  const before = (await settledRss(d.b.pid)) ?? 0;
  d.pool = await GeneratorPool.start(gens, 'delivery', (i) => ({
    system,
    aUrl: d.a.url,
    bUrl: d.b.url,
    secret: ctx.secret,
    tag: `${ctx.tag}${system[0]}`,
    gen: i,
    pairs,
    localAddresses: ctx.localAddresses(2 * z.pairs, system === 'calling' ? 3 : 4),
  }) satisfies DeliverySetup);
  await sleep(300);
  const after = (await settledRss(d.b.pid)) ?? 0;
  d.sockets = pairs * gens;
  d.bytesPerSocket = after > 0 && before > 0 ? (after - before) / d.sockets : undefined;
  ctx.log(`  ${system}: ${fmtNum(d.sockets)} pairs (a socket each on A and on B), ${d.bytesPerSocket !== undefined ? fmtBytes(d.bytesPerSocket) : 'n/a'} RSS per socket on B`);
}

async function measureLeg(ctx: BenchContext, system: System, d: Deployment, kind: DeliveryKind, run: { mode: 'closed' } | { mode: 'open'; rate: number }): Promise<Leg> {
  const z = ctx.opts.sizes.compare;
  const pool = d.pool!;
  const durationMs = run.mode === 'closed' ? z.throughputMs : z.latencyMs;
  const pids = { [`${system} A`]: d.a.pid, [`${system} B`]: d.b.pid, ...Object.fromEntries(pool.pids().map((p, i) => [`generator ${i}`, p])) };
  const stop = await ctx.cpuWindow(pids);
  const outs = await pool.run<DeliveryResult>(() => ({
    kind,
    ...(run.mode === 'closed' ? { mode: 'closed' as const, concurrency: Math.ceil(z.concurrency / pool.size) } : { mode: 'open' as const, rate: run.rate / pool.size }),
    durationMs,
    startAtMs: nowMs() + 200,
    timeoutMs: 5000,
  }) satisfies DeliveryRun);
  const cpu = await stop();
  const gen = generatorCpu(outs);
  const done = outs.reduce((a, o) => a + o.result.done, 0);
  const leg: Leg = {
    ...(run.mode === 'open' ? { rate: run.rate } : {}),
    perSecond: (done * 1000) / durationMs,
    errors: mergeErrors(outs.map((o) => o.result.errors)),
    latency: mergeHists(outs.map((o) => o.result.hist)),
    cpu,
    bound: describeBound(cpu, gen.bound, gen.maxShare),
    generatorBound: gen.bound,
  };
  const l = leg.latency[DELIVERY];
  ctx.log(
    `  ${system} ${kind}s ${run.mode === 'closed' ? `saturated (${z.concurrency} in flight)` : `at ${fmtRate(run.rate)}`}: ${fmtRate(leg.perSecond)} delivered, ` +
      `p50 ${fmtMs(l?.p50 ?? NaN)} p99 ${fmtMs(l?.p99 ?? NaN)} max ${fmtMs(l?.max ?? NaN)}, errors ${errorList(leg.errors)}; ${leg.bound}`,
  );
  return leg;
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

const errorsOf = (f: RowFigures) => {
  const merged = mergeErrors([f.throughput.errors, f.latency?.errors ?? {}]);
  return { merged, none: Object.keys(merged).length === 0 };
};

function report(ctx: BenchContext, ours: RowFigures, sio: RowFigures, rename: RowFigures, repeated: Repeated, signals: SignalsSection): ScenarioResult {
  const z = ctx.opts.sizes.compare;
  const common = ours.latency!.rate;
  const p99 = (f: RowFigures) => f.latency?.latency[DELIVERY]?.p99 ?? NaN;
  // The goals are judged on the medians of the repeated runs; `verdict` says whether the runs
  // allow telling the two apart at all.
  const sat = { calling: spreadOf(repeated.saturated.calling), socketio: spreadOf(repeated.saturated.socketio) };
  const tail = { calling: spreadOf(repeated.p99.calling), socketio: spreadOf(repeated.p99.socketio) };
  const factor = sat.calling.median / Math.max(1e-9, sat.socketio.median);
  const factorSpread = `${(sat.calling.min / sat.socketio.max).toFixed(2)}–${(sat.calling.max / sat.socketio.min).toFixed(2)}×`;
  const p99Verdict = verdict(tail.calling, tail.socketio);
  const ourErrors = errorsOf(ours);
  const factorMet = factor >= GOAL_DELIVERY_FACTOR && ourErrors.none;
  const p99Met = tail.calling.median < tail.socketio.median && ourErrors.none;
  const runs = repeated.saturated.calling.length;
  const redisCreate = ctx.ceilings.redis?.create;
  const httpCeiling = ctx.ceilings.http?.requestsPerSecond;
  const limits = Object.entries(COMPARE_LIMITS).map(([k, v]) => `${k}=${fmtNum(Number(v))}`).join(', ');
  const lat = (s: HistogramSummary | undefined) => `${fmtMs(s?.p50 ?? NaN)} / ${fmtMs(s?.p99 ?? NaN)} / ${fmtMs(s?.max ?? NaN)}`;
  const rowOf = (f: RowFigures, name: string) => [
    name,
    fmtRate(f.throughput.perSecond),
    lat(f.throughput.latency[DELIVERY]),
    fmtRate(f.latency?.rate ?? NaN),
    fmtRate(f.latency?.perSecond ?? NaN),
    lat(f.latency?.latency[DELIVERY]),
    f.bytesPerSocket !== undefined ? fmtBytes(f.bytesPerSocket) : 'n/a',
    errorList(errorsOf(f).merged),
    f.throughput.bound,
  ];
  const md = [
    `Same workload for both: ${fmtNum(ours.sockets)} pairs of users; the caller's device holds an authenticated socket (same HS256 session JWT, verified by the project's verifier) on process A, the callee's on process B, through the same Redis. ` +
      `Each message is a trickle-ICE candidate, ${PAYLOAD_BYTES} B of JSON payload (with the bench's key and send time), sent by the caller's device and timed to its arrival on the callee's socket. ` +
      `**calling-backend** (A: ROLES=api,gateway,worker; B: ROLES=gateway): every pair has an accepted call (created by the caller and answered by the callee over HTTP before measuring); ` +
      `a \`message\` frame on A's gateway → sendMessage.lua (membership check, per-sender seq, the call's message stream for recovery, idempotency record, outbox entry, atomically) → relay on A → PUBLISH → gateway B → \`message\` frame. ` +
      `**Socket.IO 4 + @socket.io/redis-adapter** (\`bench/socketio/server.ts\`, websocket transport only): \`emit('message', {toUserId, payload}, ack)\` on A → \`io.to('user:<id>').emit()\` → adapter PUBLISH → B → socket. ` +
      `The asymmetry: ours checks the sender is in the call, rate-limits, stores each message and can replay it after a reconnect (GET /v1/calls/{id}/messages); Socket.IO only forwards (a message to a socket that is down is lost).`,
    '',
    `**Limits set for a bench** on both calling processes: ${limits} (the defaults allow one person far less; the limiters still run, so their cost is measured), plus the bench's raised call-creation limits. Socket.IO has none.`,
    '',
    `Saturated: closed loop, ${z.concurrency} messages in flight, ${z.throughputMs / 1000} s. At the common rate: open loop at ${fmtRate(common)} for both (half the slower system's saturated rate), ${z.latencyMs / 1000} s, measured from the scheduled send. ` +
      `The durable row: \`POST /v1/calls/{id}/rename\` by the caller on A → renameCall.lua → relay → appendEvents.lua (the callee's resumable event log + PUBLISH) → gateway B → \`call.renamed\`, on the same pairs, at ${fmtRate(rename.latency?.rate ?? NaN)} (the common rate, or half its own saturated rate when lower).`,
    '',
    mdTable(
      ['row', 'deliveries/s (saturated)', 'p50 / p99 / max saturated', 'open-loop rate', 'deliveries/s there', 'p50 / p99 / max there', `B memory per socket (RSS growth / ${fmtNum(ours.sockets)}, after GC)`, 'errors (both runs)', 'bound (saturated)'],
      [
        rowOf(ours, 'calling-backend: in-call messages, socket → socket'),
        rowOf(sio, 'Socket.IO 4 + Redis adapter: messages, socket → socket'),
        rowOf(rename, 'calling-backend, durable path: renames, HTTP → event log → socket'),
      ],
    ),
    '',
    `Each leg ran ${runs} times, the systems alternated; the table shows each system's median run. Over the runs, median (lowest–highest):`,
    '',
    mdTable(
      ['', 'calling-backend', 'Socket.IO', 'ratio of medians', 'conclusive?'],
      [
        ['messages/s saturated', fmtSpread(sat.calling, 0), fmtSpread(sat.socketio, 0), `${factor.toFixed(2)}× (runs: ${factorSpread})`, verdict(sat.calling, sat.socketio) === 'inconclusive' ? 'no: the runs overlap' : 'yes'],
        [`p99 ms at ${fmtRate(common)}`, fmtSpread(tail.calling, 2), fmtSpread(tail.socketio, 2), `${(tail.calling.median / tail.socketio.median).toFixed(2)}×`, p99Verdict === 'inconclusive' ? 'no: the runs overlap' : `yes: ours is ${p99Verdict}`],
      ],
    ),
    '',
    `**Throughput factor: ${factor.toFixed(2)}×** Socket.IO's by the medians (goal ≥ ${GOAL_DELIVERY_FACTOR}×); message p99 at ${fmtRate(common)}: ${fmtMs(tail.calling.median)} vs ${fmtMs(tail.socketio.median)} by the medians (goal: below Socket.IO's${p99Verdict === 'inconclusive' ? '; the runs overlap, so this run cannot tell' : ''}).`,
    '',
    `Ratios to this run's ceilings (durable row): renames ${ratio(rename.throughput.perSecond, redisCreate)} of the Redis-bound create+deliver ceiling (${redisCreate ? fmtRate(redisCreate) : 'n/a'}), ${ratio(rename.throughput.perSecond, httpCeiling)} of the raw uWS HTTP ceiling (one request per rename).`,
    '',
    `Bound at the open-loop rate — calling-backend messages: ${ours.latency?.bound ?? 'n/a'}; Socket.IO: ${sio.latency?.bound ?? 'n/a'}; renames: ${rename.latency?.bound ?? 'n/a'}.`,
    '',
    signals.markdown,
  ].join('\n');
  const measured = `${factor.toFixed(2)}× by the medians of ${runs} runs (${fmtRate(sat.calling.median)} vs ${fmtRate(sat.socketio.median)}; runs ${factorSpread}); errors: ours ${errorList(ourErrors.merged)}, Socket.IO ${errorList(errorsOf(sio).merged)}`;
  return {
    id: 'compare',
    title: 'In-call messages and live signals vs Socket.IO 4 + Redis adapter',
    headlines: [
      {
        metric: 'in-call messages/s socket → socket (saturated): ours vs Socket.IO',
        value: `${fmtRate(sat.calling.median)} vs ${fmtRate(sat.socketio.median)} (${factor.toFixed(2)}×; medians of ${runs} runs)`,
        ceiling: 'Socket.IO (same run)',
        ratio: `${factor.toFixed(2)}×`,
        bound: ours.throughput.bound,
      },
      {
        metric: `message p99 at ${fmtRate(common)}: ours vs Socket.IO`,
        value: `${fmtMs(tail.calling.median)} vs ${fmtMs(tail.socketio.median)} (medians of ${runs} runs)`,
        ceiling: 'Socket.IO (same run)',
        ratio: `${(tail.calling.median / tail.socketio.median).toFixed(2)}×`,
      },
      {
        metric: `durable renames/s HTTP → socket (saturated); p99 at ${fmtRate(rename.latency?.rate ?? NaN)}`,
        value: `${fmtRate(rename.throughput.perSecond)}; ${fmtMs(p99(rename))}`,
        ceiling: redisCreate ? `Redis-bound create ${fmtRate(redisCreate)}` : 'n/a',
        ratio: ratio(rename.throughput.perSecond, redisCreate),
        bound: rename.throughput.bound,
      },
      {
        metric: `memory per connection on B (average over ${fmtNum(ours.sockets)}): ours vs Socket.IO`,
        value:
          `${ours.bytesPerSocket !== undefined ? fmtBytes(ours.bytesPerSocket) : 'n/a'} vs ${sio.bytesPerSocket !== undefined ? fmtBytes(sio.bytesPerSocket) : 'n/a'}` +
          (ctx.findings.idleBytesPerSocket !== undefined ? ` (ours, marginal, idle scenario: ${fmtBytes(ctx.findings.idleBytesPerSocket)})` : ''),
        ceiling: ctx.ceilings.rawWsBytesPerSocket !== undefined ? `raw uWS ${fmtBytes(ctx.ceilings.rawWsBytesPerSocket)}` : 'raw uWS: measured in idle',
        ratio: ours.bytesPerSocket !== undefined && sio.bytesPerSocket ? `${(ours.bytesPerSocket / sio.bytesPerSocket).toFixed(2)}× Socket.IO's` : 'n/a',
      },
      ...signals.headlines,
    ],
    goals: [
      {
        goal: `in-call messages socket → socket ≥ ${GOAL_DELIVERY_FACTOR}× Socket.IO's deliveries/s, saturated, with bench limits and no errors`,
        target: `≥ ${GOAL_DELIVERY_FACTOR}×`,
        measured,
        status: factorMet ? 'MET' : 'MISSED',
        atGoalSize: ctx.opts.sizes.mode !== 'smoke',
        note: `ours: ${ours.throughput.bound}; Socket.IO: ${sio.throughput.bound}`,
      },
      {
        goal: `in-call message p99 at a common open-loop rate below Socket.IO's`,
        target: "p99 below Socket.IO's",
        measured: `${fmtMs(tail.calling.median)} vs ${fmtMs(tail.socketio.median)} at ${fmtRate(common)}, medians of ${runs} runs (${fmtSpread(tail.calling, 2)} vs ${fmtSpread(tail.socketio, 2)} ms; ${p99Verdict === 'inconclusive' ? 'the runs overlap' : `ours ${p99Verdict}`}); errors: ours ${errorList(ourErrors.merged)}`,
        status: p99Met ? 'MET' : 'MISSED',
        atGoalSize: ctx.opts.sizes.mode !== 'smoke',
        note: `ours: ${ours.latency?.bound ?? 'n/a'}; Socket.IO: ${sio.latency?.bound ?? 'n/a'}`,
      },
      ...signals.goals,
    ],
    markdown: md,
    data: { payloadBytes: PAYLOAD_BYTES, pairs: ours.sockets, limits: COMPARE_LIMITS, ours, socketio: sio, rename, repeated, signals: signals.figures, sendFloor: signals.floor },
  };
}
