import type { BenchContext } from '../lib/context.js';
import type { ListeningProcess } from '../lib/processes.js';
import { cpuMs, openFilesLimit } from '../lib/procstat.js';
import { nowMs, sleep } from '../lib/clock.js';
import { device, type Device } from '../lib/users.js';
import { invalidReasons } from '../lib/validity.js';
import { errorList, fmtMs, fmtNum, fmtPct, mdTable, type Goal, type ScenarioResult } from '../lib/report.js';
import { socketioStorm } from './reconnectSocketio.js';
import { GeneratorPool } from '../lib/generators.js';
import type { StormChangesResult, StormChangesSetup } from '../workers/stormChanges.js';
import type { StormCheck, StormDevicesSetup, StormResync } from '../workers/stormDevices.js';
import { mergeWayBack, type Quantiles } from '../lib/wayBack.js';

/**
 * A reconnect storm (docs/signaling.md "A reconnect storm"): N devices in pairs, spread over two
 * gateway processes, an api/worker process making a steady rate of changes (calls created,
 * answered, renamed, messaged, ended); gateway A is killed with SIGKILL and its devices come back
 * on B (a load balancer's view) with the client package's backoff and full jitter, resuming by
 * cursor. Measured: the time until 50, 99 and 100 % of A's devices are synced again; events lost
 * (each installation's received events against its log), repeated at the wire (dropped by eventId
 * by the client) and out of order; Redis CPU and commands, B's CPU and event loop delay during
 * the storm; p99 latency of the changes of pairs wholly on B, before and during the storm.
 * Then the same storm against Socket.IO 4 with connection state recovery (reconnectSocketio.ts).
 */

async function callingStorm(ctx: BenchContext, z: StormSize): Promise<ScenarioResult> {
  const title = `Reconnect storm (${fmtNum(z.devices)} devices, one gateway killed)`;
  if (!ctx.selfHosted) return { id: 'reconnect', title, headlines: [], goals: [], markdown: 'Not run: targeting an existing deployment (the storm kills a process it started).', data: null };
  const prefix = `rc${ctx.tag}`;
  // The gateways' admission control as a deployment runs it (docs/signaling.md "A reconnect storm").
  const admission = { WS_ADMISSIONS_PER_S: String(z.admissionsPerS) };
  const limits = { RATE_CALL_MESSAGES_PER_10S: '100000000', RATE_WS_MESSAGES_PER_10S: '100000000', RATE_RENAMES_PER_MIN: '100000000', RENAMES_PER_CALL: '1000' };
  const [api, A, B] = await Promise.all([
    ctx.startServer('reconnect-api', { ...limits, ROLES: 'api,worker', REDIS_PREFIX: prefix }),
    ctx.startServer('reconnect-A', { ...limits, ...admission, ROLES: 'gateway', REDIS_PREFIX: prefix }),
    ctx.startServer('reconnect-B', { ...limits, ...admission, ROLES: 'gateway', REDIS_PREFIX: prefix }),
  ]);
  const errors: Record<string, number> = {};
  const count = (k: string) => (errors[k] = (errors[k] ?? 0) + 1);
  const wsBase = (p: ListeningProcess) => p.url.replace(/^http/, 'ws');
  let devices: GeneratorPool | undefined;
  try {
    // The devices, in pairs, over generator processes (bench/workers/stormDevices.ts): a pair's
    // caller on A for even pairs, its callee on A for pairs 0 and 1 of every 4.
    const pairs: { caller: Device; callee: Device; callerHome: 'A' | 'B'; calleeHome: 'A' | 'B' }[] = [];
    for (let i = 0; i < z.devices / 2; i++) {
      const party = (n: number) => device(ctx.secret, `rc-${ctx.tag}-${n}`, `rc-${ctx.tag}-${n}-phone`);
      pairs.push({ caller: party(2 * i), callee: party(2 * i + 1), callerHome: i % 2 === 0 ? 'A' : 'B', calleeHome: i % 4 < 2 ? 'A' : 'B' });
    }
    const all = pairs.flatMap((p) => [{ d: p.caller, home: p.callerHome }, { d: p.callee, home: p.calleeHome }]);
    const procs = Math.max(2, ctx.opts.generators);
    devices = await GeneratorPool.start(procs, 'stormDevices', (i): StormDevicesSetup => ({
      aUrl: wsBase(A),
      bUrl: wsBase(B),
      aPort: A.port,
      bPort: B.port,
      devices: all.filter((_, k) => k % procs === i),
    }));
    const onA = all.filter((p) => p.home === 'A').length;
    ctx.log(`  ${fmtNum(all.length)} devices synced (${onA} on A) in ${procs} generator processes, ${z.rate}/s changes`);

    // The steady flow, from a process of its own (bench/workers/stormChanges.ts).
    const flow = await GeneratorPool.start(1, 'stormChanges', (): StormChangesSetup => ({
      apiUrl: api.url,
      rate: z.rate,
      pairs: pairs.map((p) => ({ caller: p.caller, callee: p.callee, unaffected: p.callerHome === 'B' && p.calleeHome === 'B' })),
    }));
    await flow.run(() => ({ start: true }));

    await sleep(z.beforeMs);
    const metricsB = async () => {
      const port = B.listening.metricsPort as number | undefined;
      if (!port) return { loopDelayMaxMs: NaN, refused: NaN };
      const text = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text()).catch((err: unknown) => {
        count(`B's metrics: ${(err as Error).message}`);
        return '';
      });
      const metric = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
      return { loopDelayMaxMs: metric('calling_nodejs_eventloop_lag_max_seconds') * 1000, refused: metric('calling_ws_admissions_refused_total') };
    };
    const refusedBefore = (await metricsB()).refused; // also resets the delay's histogram
    const [redisBefore, commandsBefore] = await Promise.all([ctx.redisInfo(), ctx.commandStats()]);
    const cpuBBefore = cpuMs(B.pid) ?? NaN;
    await devices.run(() => ({ aDead: true }));
    const killedAt = nowMs();
    process.kill(A.pid, 'SIGKILL');
    const waits = await devices.run<StormResync>(() => ({ awaitResync: { killedAt, deadlineMs: 120_000 } }));
    const doneAt = nowMs();
    const [redisAfter, commandsAfter, { loopDelayMaxMs, refused }] = await Promise.all([ctx.redisInfo(), ctx.commandStats(), metricsB()]);
    const refusedAtB = refused - refusedBefore;
    const cpuBAfter = cpuMs(B.pid) ?? NaN;
    const resynced = waits.flatMap((w) => w.result.resyncedMs).sort((a, b) => a - b);
    const wayBack = mergeWayBack(waits.map((w) => w.result.wayBack));
    await sleep(z.afterMs);
    const changes = (await flow.run<StormChangesResult>(() => ({ stop: true })))[0]!.result;
    await flow.close();
    const latency = changes.latency;
    for (const [k, n] of Object.entries(changes.errors)) errors[k] = (errors[k] ?? 0) + n;

    // Lost, repeated, out of order: each installation's events against its log.
    await sleep(1000); // the relay's last batches
    const checks = (await devices.run<StormCheck>(() => ({ check: { apiUrl: api.url } }))).map((c) => c.result);
    const sum = (k: 'lost' | 'extra' | 'outOfOrder' | 'gaps' | 'handed' | 'repeats') => checks.reduce((n, c) => n + c[k], 0);
    const [lost, extra, outOfOrder, gaps, handed, repeats] = [sum('lost'), sum('extra'), sum('outOfOrder'), sum('gaps'), sum('handed'), sum('repeats')];
    for (const c of checks) for (const [k, n] of Object.entries(c.errors)) errors[k] = (errors[k] ?? 0) + n;
    const p99 = (xs: number[]) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(0.99 * xs.length))]! : NaN);
    const before = p99(latency.filter((l) => l.unaffected && l.atMs < killedAt).map((l) => l.ms));
    const during = p99(latency.filter((l) => l.unaffected && l.atMs >= killedAt && l.atMs <= doneAt).map((l) => l.ms));
    const at = (q: number) => (resynced.length === onA ? resynced[Math.min(resynced.length - 1, Math.ceil(q * resynced.length) - 1)]! : NaN);
    const stormS = (doneAt - killedAt) / 1000;
    const commands = Object.entries(commandsAfter).reduce((n, [k, v]) => n + v.calls - (commandsBefore[k]?.calls ?? 0), 0);
    const redisCpu = (redisAfter.cpuSec - redisBefore.cpuSec) / stormS;
    const cpuB = (cpuBAfter - cpuBBefore) / 1000 / stormS;
    // The devices' processes bound the resync as much as the servers do: the busiest one counts.
    const cpuClients = Math.max(...waits.map((w) => w.cpu.share));
    const bound = stormBound({ 'gateway B': cpuB, Redis: redisCpu, [`the devices (busiest of ${procs} processes)`]: cpuClients });
    const curve = resynced.map((ms, i) => [ms, (i + 1) / onA] as const);
    ctx.log(`  resynced ${resynced.length}/${onA}: 50 % ${fmtMs(at(0.5))}, 99 % ${fmtMs(at(0.99))}, 100 % ${fmtMs(at(1))}; lost ${lost}, repeats ${repeats} (dropped), out of order ${outOfOrder}`);
    const md = [
      `${fmtNum(all.length)} devices in ${fmtNum(pairs.length)} pairs over two gateways (${onA} on A), held by ${procs} generator processes, ${z.rate} changes/s through an api/worker process (create, answer, renames, in-call messages, end). ` +
        `Gateway A killed with SIGKILL after ${z.beforeMs / 1000} s; its devices reconnect to B with the client package's backoff and full jitter and resume by cursor. ` +
        `The gateways admit ${fmtNum(z.admissionsPerS)} new sockets a second (WS_ADMISSIONS_PER_S); beyond it a socket is closed with 1013 and a time to come back, which the client honours (${fmtNum(refusedAtB)} such closes at B).`,
      '',
      mdTable(
        ['resynced', '50 %', '99 %', '100 %', 'events lost', 'repeats at the wire (dropped by eventId)', 'out of order', 'gaps', 'errors'],
        [[`${resynced.length}/${onA}`, fmtMs(at(0.5)), fmtMs(at(0.99)), fmtMs(at(1)), fmtNum(lost), fmtNum(repeats), fmtNum(outOfOrder), fmtNum(gaps), errorList(errors)]],
      ),
      '',
      mdTable(
        ['during the storm', 'Redis CPU', 'Redis commands', 'gateway B CPU', 'the devices\' CPU (busiest generator)', 'B event loop delay (max)', 'p99 of B-only pairs\' changes before / during'],
        [[`${stormS.toFixed(2)} s`, fmtPct(redisCpu), fmtNum(commands), fmtPct(cpuB), fmtPct(cpuClients), fmtMs(loopDelayMaxMs), `${fmtMs(before)} / ${fmtMs(during)}`]],
      ),
      '',
      `What bounds the recovery time: ${bound}.`,
    ].join('\n');
    return {
      id: 'reconnect',
      title,
      headlines: [
        { metric: 'reconnect storm: time to 50 / 99 / 100 % resynced', value: `${fmtMs(at(0.5))} / ${fmtMs(at(0.99))} / ${fmtMs(at(1))}`, ceiling: 'n/a', ratio: '' },
        { metric: 'reconnect storm: events lost / out of order', value: `${lost} / ${outOfOrder}`, ceiling: 'n/a', ratio: '' },
      ],
      goals: [],
      markdown: md,
      data: { devices: all.length, onA, resyncedMs: resynced, wayBack, curve, lost, extra, repeats, outOfOrder, gaps, errors, stormS, redisCpu, commands, cpuB, cpuClients, bound, refusedAtB, loopDelayMaxMs, p99BeforeMs: before, p99DuringMs: during },
      invalid: invalidReasons({
        errors: [{ where: 'the storm', errors }],
        nonZero: [
          { what: 'events handed on', n: handed },
          { what: 'changes made', n: latency.length },
        ],
        hold: [
          { ok: resynced.length === onA, what: `${resynced.length} of ${onA} devices of A resynced` },
          { ok: lost === 0, what: `${lost} events lost` },
          { ok: extra === 0, what: `${extra} events handed on that are not in the log` },
          { ok: outOfOrder === 0, what: `${outOfOrder} events out of order` },
          { ok: repeats >= 0, what: `${repeats} repeats (fewer frames than events handed on)` },
        ],
      }),
    };
  } finally {
    await devices?.close();
    await Promise.all([api, B].map((p) => ctx.stopServer(p).catch(() => {})));
    await ctx.stopServer(A).catch(() => {});
  }
}

/**
 * Which resource bounded a storm: a process at 90 % of a core or more was saturated; else none
 * was, and the time is the clients' backoff and jitter spreading the reconnects (by design).
 */
function stormBound(cpu: Record<string, number>): string {
  const [name, share] = Object.entries(cpu).sort((a, b) => b[1] - a[1])[0]!;
  const all = Object.entries(cpu).map(([k, v]) => `${k} ${fmtPct(v)}`).join(', ');
  return share >= 0.9 ? `${name}, saturated (${all} of a core)` : `no single CPU saturated (${all} of a core): the clients' backoff and full jitter spread the reconnects`;
}

type WayBack = ReturnType<typeof mergeWayBack>;

/**
 * Where each system's time to resync goes (bench/lib/wayBack.ts): each step's p50 / p99 in ms
 * since the kill, over the killed server's devices, and the device processes' longest stall.
 */
function wayBackTable(ours: WayBack, sio: WayBack): string {
  const cell = (s: Quantiles) => `${fmtMs(s.p50)} / ${fmtMs(s.p99)}`;
  return [
    'Each device\'s way back, ms since the kill (p50 / p99 over the killed server\'s devices): the close seen, the first reconnect attempt (after the client\'s backoff), that socket open, then synced (ours: the `synced` frame) or connected (Socket.IO). ' +
      'Then, per device, from its socket open to synced: the server\'s part (upgrade, token, resume and replay; Socket.IO: its handshake and recovery). ' +
      'The device processes run the clients of thousands of phones on this machine\'s two cores, beside the servers: their longest event-loop stall delays every step after it, whatever the server does.',
    '',
    mdTable(
      ['step', 'calling backend', 'Socket.IO 4 + recovery'],
      [
        ['close seen', cell(ours.steps.closed), cell(sio.steps.closed)],
        ['first reconnect attempt', cell(ours.steps.attempt), cell(sio.steps.attempt)],
        ['socket open', cell(ours.steps.open), cell(sio.steps.open)],
        ['synced / connected', cell(ours.steps.synced), cell(sio.steps.synced)],
        ['open → synced, per device (the server\'s part)', cell(ours.openToSynced), cell(sio.openToSynced)],
        ["device processes' longest event-loop stall", fmtMs(ours.stallMaxMs), fmtMs(sio.stallMaxMs)],
      ],
    ),
  ].join('\n');
}

/** The storm's goals (issue 48; bench/README.md "Reconnect storm"). */
export const GOAL_RESYNC_FACTOR = 0.5;
export const GOAL_UNAFFECTED_P99_FACTOR = 2;

const pct = (sorted: number[], n: number, q: number) => (sorted.length === n && n > 0 ? sorted[Math.min(n - 1, Math.ceil(q * n) - 1)]! : NaN);

type StormSize = BenchContext['opts']['sizes']['reconnect'] & { cappedFrom?: number; openFiles?: string };

/** Files a process needs besides its sockets (Redis connections, HTTP, the runtime's own). */
const OPEN_FILES_MARGIN = 4000;

/**
 * The storm's size: at most what one process's open files allow. The surviving gateway holds
 * every device once the other is dead, each a file, and a process cannot raise its limit (20,000
 * on this machine: the full size, 20,000 devices, becomes 16,000 here).
 */
async function stormSize(ctx: BenchContext): Promise<StormSize> {
  const z = ctx.opts.sizes.reconnect;
  const openFiles = await openFilesLimit();
  const fits = 2 * Math.floor((Number(openFiles) - OPEN_FILES_MARGIN) / 2);
  return Number.isFinite(fits) && fits < z.devices ? { ...z, devices: fits, cappedFrom: z.devices, openFiles } : z;
}

export async function reconnectScenario(ctx: BenchContext): Promise<ScenarioResult> {
  const z = await stormSize(ctx);
  if (z.cappedFrom) ctx.log(`  ${fmtNum(z.devices)} devices, not ${fmtNum(z.cappedFrom)}: the open files limit is ${z.openFiles} (ulimit -n, which a process cannot raise), and the surviving gateway holds every device's socket`);
  const ours = await callingStorm(ctx, z);
  if (!ours.data) return ours;
  const sio = await socketioStorm(ctx, z);
  const o = ours.data as { resyncedMs: number[]; onA: number; wayBack: WayBack };
  const at = (r: { resyncedMs: number[]; onA: number }, q: number) => pct(r.resyncedMs, r.onA, q);
  const ratio99 = at(o, 0.99) / at(sio, 0.99);
  ctx.log(`  Socket.IO: resynced ${sio.resyncedMs.length}/${sio.onA} (${sio.notRecovered} not recovered): 50 % ${fmtMs(at(sio, 0.5))}, 99 % ${fmtMs(at(sio, 0.99))}, 100 % ${fmtMs(at(sio, 1))}; lost ${sio.lost} of ${sio.sent}, repeats ${sio.repeats}, out of order ${sio.outOfOrder}`);
  const steps = (w: WayBack) => `closed ${fmtMs(w.steps.closed.p50)}, attempt ${fmtMs(w.steps.attempt.p50)}, open ${fmtMs(w.steps.open.p50)}, synced ${fmtMs(w.steps.synced.p50)}; open → synced p50 ${fmtMs(w.openToSynced.p50)} p99 ${fmtMs(w.openToSynced.p99)}; longest stall ${fmtMs(w.stallMaxMs)}`;
  ctx.log(`  the way back (p50 since the kill): ours ${steps(o.wayBack)}; Socket.IO ${steps(sio.wayBack)}`);
  const md = [
    ours.markdown,
    '',
    ...(z.cappedFrom ? [`${fmtNum(z.devices)} devices, not ${fmtNum(z.cappedFrom)}: the open files limit here is ${z.openFiles} (\`ulimit -n\`, which a process cannot raise), and the surviving gateway holds every device's socket.`, ''] : []),
    `The same storm against Socket.IO 4 with connection state recovery and the Redis Streams adapter (bench/socketio/recoveryServer.ts): ${fmtNum(z.devices)} sockets over two servers, ${z.rate} packets/s (one per change, to one device's room), server A killed with SIGKILL; socket.io-client's own backoff (base 250 ms) with a load balancer's view.`,
    '',
    mdTable(
      ['system', 'reconnected', '50 %', '99 %', '100 %', 'not recovered', 'lost', 'repeats', 'out of order', 'errors'],
      [
        ['calling backend', `${o.resyncedMs.length}/${o.onA}`, fmtMs(at(o, 0.5)), fmtMs(at(o, 0.99)), fmtMs(at(o, 1)), '0', fmtNum((ours.data as { lost: number }).lost), fmtNum((ours.data as { repeats: number }).repeats), fmtNum((ours.data as { outOfOrder: number }).outOfOrder), '(above)'],
        ['Socket.IO 4 + recovery', `${sio.resyncedMs.length}/${sio.onA}`, fmtMs(at(sio, 0.5)), fmtMs(at(sio, 0.99)), fmtMs(at(sio, 1)), fmtNum(sio.notRecovered), `${fmtNum(sio.lost)} of ${fmtNum(sio.sent)}`, fmtNum(sio.repeats), fmtNum(sio.outOfOrder), errorList(sio.errors)],
      ],
    ),
    '',
    `Time to 99 % resynced, ours ÷ Socket.IO's: ${Number.isFinite(ratio99) ? `${ratio99.toFixed(2)}×` : 'n/a'} (goal ≤ 0.5×).`,
    '',
    wayBackTable(o.wayBack, sio.wayBack),
  ].join('\n');
  const d = ours.data as { lost: number; onA: number; resyncedMs: number[]; p99BeforeMs: number; p99DuringMs: number; bound: string };
  const atGoalSize = ctx.opts.sizes.mode !== 'smoke';
  const goals: Goal[] = [
    { goal: 'reconnect storm: 0 events lost', target: '0', measured: `${fmtNum(d.lost)} lost (each installation's events against its log)`, status: d.lost === 0 ? 'MET' : 'MISSED', atGoalSize, note: `${fmtNum(z.devices)} devices, ${fmtNum(d.onA)} on the killed gateway` },
    { goal: 'reconnect storm: every device of the killed gateway resynced', target: '100 %', measured: `${fmtNum(d.resyncedMs.length)} of ${fmtNum(d.onA)}`, status: d.resyncedMs.length === d.onA ? 'MET' : 'MISSED', atGoalSize, note: d.bound },
    {
      goal: `reconnect storm: time to 99 % resynced at most ${GOAL_RESYNC_FACTOR}× Socket.IO's with connection state recovery, same run`,
      target: `≤ ${GOAL_RESYNC_FACTOR}×`,
      measured: Number.isFinite(ratio99) ? `${ratio99.toFixed(2)}× (${fmtMs(at(o, 0.99))} vs ${fmtMs(at(sio, 0.99))})` : 'n/a',
      status: Number.isFinite(ratio99) && ratio99 <= GOAL_RESYNC_FACTOR ? 'MET' : 'MISSED',
      atGoalSize,
      note: `ours: ${d.bound}; the servers' part (each device's socket open → synced) p99 ${fmtMs(o.wayBack.openToSynced.p99)} vs ${fmtMs(sio.wayBack.openToSynced.p99)} (${(o.wayBack.openToSynced.p99 / sio.wayBack.openToSynced.p99).toFixed(2)}×): the rest is the device processes (bench/README.md "Reconnect storm")`,
    },
    {
      goal: `reconnect storm: p99 of the changes of calls not on the killed gateway, during the storm, at most ${GOAL_UNAFFECTED_P99_FACTOR}× before`,
      target: `≤ ${GOAL_UNAFFECTED_P99_FACTOR}×`,
      measured: `${fmtMs(d.p99DuringMs)} during vs ${fmtMs(d.p99BeforeMs)} before (${(d.p99DuringMs / d.p99BeforeMs).toFixed(2)}×)`,
      status: d.p99DuringMs <= GOAL_UNAFFECTED_P99_FACTOR * d.p99BeforeMs ? 'MET' : 'MISSED',
      atGoalSize,
      note: 'pairs with both devices on the surviving gateway; the storm lasts from the kill until every device of the killed one resynced',
    },
  ];
  return {
    ...ours,
    goals,
    headlines: [
      ...ours.headlines,
      { metric: 'reconnect storm: 99 % resynced, ours ÷ Socket.IO with recovery', value: Number.isFinite(ratio99) ? `${ratio99.toFixed(2)}×` : 'n/a', ceiling: 'n/a', ratio: '' },
    ],
    markdown: md,
    data: { ...(ours.data as object), socketio: sio },
    invalid: [...(ours.invalid ?? []), ...invalidReasons({ errors: [{ where: 'the Socket.IO storm', errors: sio.errors }], nonZero: [{ what: 'Socket.IO packets sent', n: sio.sent }] })],
  };
}
