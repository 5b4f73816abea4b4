import WebSocket from 'ws';
import { randomUUID } from 'node:crypto';
import { SignalingClient, type EventPayload, type SignalingOptions } from '@calling-backend/client';
import type { BenchContext } from '../lib/context.js';
import type { ListeningProcess } from '../lib/processes.js';
import { cpuMs } from '../lib/procstat.js';
import { nowMs, sleep } from '../lib/clock.js';
import { device, type Device } from '../lib/users.js';
import { invalidReasons } from '../lib/validity.js';
import { errorList, fmtMs, fmtNum, fmtPct, mdTable, type ScenarioResult } from '../lib/report.js';
import { socketioStorm } from './reconnectSocketio.js';

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

interface Party {
  d: Device;
  home: 'A' | 'B';
  client: SignalingClient;
  startCursor?: string;
  events: EventPayload[];
  gaps: string[];
  synced: number[];
  rawEvents: number;
}

interface Pair {
  caller: Party;
  callee: Party;
  callId?: string;
  step: number;
  busy: boolean;
}

/** A pair's calls: create, answer, three renames each followed by a message, end; then again. */
const STEPS = ['create', 'answer', 'rename', 'message', 'rename', 'message', 'rename', 'message', 'end'] as const;

async function callingStorm(ctx: BenchContext): Promise<ScenarioResult> {
  const z = ctx.opts.sizes.reconnect;
  const title = `Reconnect storm (${fmtNum(z.devices)} devices, one gateway killed)`;
  if (!ctx.selfHosted) return { id: 'reconnect', title, headlines: [], goals: [], markdown: 'Not run: targeting an existing deployment (the storm kills a process it started).', data: null };
  const prefix = `rc${ctx.tag}`;
  const limits = { RATE_CALL_MESSAGES_PER_10S: '100000000', RATE_WS_MESSAGES_PER_10S: '100000000', RATE_RENAMES_PER_MIN: '100000000', RENAMES_PER_CALL: '1000' };
  const [api, A, B] = await Promise.all([
    ctx.startServer('reconnect-api', { ...limits, ROLES: 'api,worker', REDIS_PREFIX: prefix }),
    ctx.startServer('reconnect-A', { ...limits, ROLES: 'gateway', REDIS_PREFIX: prefix }),
    ctx.startServer('reconnect-B', { ...limits, ROLES: 'gateway', REDIS_PREFIX: prefix }),
  ]);
  let aDead = false;
  const parties: Party[] = [];
  const errors: Record<string, number> = {};
  const count = (k: string) => (errors[k] = (errors[k] ?? 0) + 1);
  const wsBase = (p: ListeningProcess) => p.url.replace(/^http/, 'ws');
  try {
    const makeParty = (home: 'A' | 'B', n: number): Party => {
      const p = { d: device(ctx.secret, `rc-${ctx.tag}-${n}`, `rc-${ctx.tag}-${n}-phone`), home, events: [], gaps: [], synced: [], rawEvents: 0 } as unknown as Party;
      const Balanced = class extends WebSocket {
        constructor(url: string, protocols?: string | string[], options?: WebSocket.ClientOptions) {
          super(aDead ? url.replace(`:${A.port}/`, `:${B.port}/`) : url, protocols, options);
          this.on('message', (data: Buffer, isBinary: boolean) => {
            if (!isBinary && data.toString('utf8', 0, 15) === '{"type":"event"') p.rawEvents++;
          });
        }
      } as unknown as NonNullable<SignalingOptions['WebSocket']>;
      p.client = new SignalingClient({
        url: wsBase(home === 'A' ? A : B),
        token: p.d.token,
        WebSocket: Balanced,
        onEvent: (e) => p.events.push(e),
        onGap: (reason) => p.gaps.push(reason),
        onSynced: (cursor) => {
          p.startCursor ??= cursor;
          p.synced.push(nowMs());
        },
        onError: () => {},
        startTimeoutMs: 120_000,
      });
      return p;
    };
    const pairs: Pair[] = [];
    for (let i = 0; i < z.devices / 2; i++) {
      const caller = makeParty(i % 2 === 0 ? 'A' : 'B', 2 * i);
      const callee = makeParty(i % 4 < 2 ? 'A' : 'B', 2 * i + 1);
      parties.push(caller, callee);
      pairs.push({ caller, callee, step: 0, busy: false });
    }
    for (let i = 0; i < parties.length; i += 200) await Promise.all(parties.slice(i, i + 200).map((p) => p.client.start()));
    ctx.log(`  ${fmtNum(parties.length)} devices synced (${parties.filter((p) => p.home === 'A').length} on A), ${z.rate}/s changes`);

    // The steady flow: `rate` changes a second, each to the next idle pair.
    const latency: { atMs: number; ms: number; unaffected: boolean }[] = [];
    const post = async (d: Device, path: string, body: unknown) => {
      const res = await fetch(`${api.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${d.token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const json = (await res.json()) as Record<string, unknown>;
      if (res.status >= 300) count(`${path.split('/').at(-1)} ${res.status}`);
      return json;
    };
    const advance = async (pair: Pair) => {
      const step = STEPS[pair.step % STEPS.length]!;
      const t0 = nowMs();
      const op = { operationId: randomUUID() };
      if (step === 'create') {
        pair.callId = randomUUID();
        await post(pair.caller.d, '/v1/calls', { ...op, callId: pair.callId, calleeUserId: pair.callee.d.userId });
      } else if (step === 'answer') await post(pair.callee.d, `/v1/calls/${pair.callId}/answer`, { ...op, installationId: pair.callee.d.installationId });
      else if (step === 'rename') await post(pair.caller.d, `/v1/calls/${pair.callId}/rename`, { ...op, displayName: `Caller ${pair.step}` });
      else if (step === 'message') await post(pair.caller.d, `/v1/calls/${pair.callId}/messages`, { ...op, payload: { n: pair.step } });
      else await post(pair.caller.d, `/v1/calls/${pair.callId}/end`, { ...op, reason: 'localHangup' });
      latency.push({ atMs: t0, ms: nowMs() - t0, unaffected: pair.caller.home === 'B' && pair.callee.home === 'B' });
      pair.step++;
    };
    let next = 0;
    let owed = 0;
    const inFlight = new Set<Promise<void>>();
    const ticker = setInterval(() => {
      owed += z.rate / 50;
      for (let tries = 0; owed >= 1 && tries < pairs.length; tries++) {
        const pair = pairs[next++ % pairs.length]!;
        if (pair.busy) continue;
        owed--;
        pair.busy = true;
        const p = advance(pair)
          .catch((err: unknown) => {
            count(`request ${(err as Error).message}`);
          })
          .finally(() => {
            pair.busy = false;
            inFlight.delete(p);
          });
        inFlight.add(p);
      }
    }, 20);

    await sleep(z.beforeMs);
    const metricsB = async () => {
      const port = B.listening.metricsPort as number | undefined;
      if (!port) return NaN;
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text().catch(() => '');
      return Number(/^calling_nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text)?.[1] ?? NaN) * 1000;
    };
    await metricsB(); // resets the delay's histogram
    const [redisBefore, commandsBefore] = await Promise.all([ctx.redisInfo(), ctx.commandStats()]);
    const cpuBBefore = cpuMs(B.pid) ?? NaN;
    aDead = true;
    const killedAt = nowMs();
    process.kill(A.pid, 'SIGKILL');
    const onA = parties.filter((p) => p.home === 'A');
    const deadline = killedAt + 120_000;
    while (!onA.every((p) => p.synced.some((t) => t > killedAt)) && nowMs() < deadline) await sleep(20);
    const doneAt = nowMs();
    const [redisAfter, commandsAfter, loopDelayMaxMs] = await Promise.all([ctx.redisInfo(), ctx.commandStats(), metricsB()]);
    const cpuBAfter = cpuMs(B.pid) ?? NaN;
    const resynced = onA.map((p) => p.synced.find((t) => t > killedAt)).filter((t): t is number => t !== undefined).map((t) => t - killedAt).sort((a, b) => a - b);
    await sleep(z.afterMs);
    clearInterval(ticker);
    await Promise.all(inFlight);

    // Lost, repeated, out of order: each installation's events against its log.
    let lost = 0;
    let outOfOrder = 0;
    let extra = 0;
    const readLog = async (p: Party) => {
      const ids: string[] = [];
      let cursor = p.startCursor!;
      for (;;) {
        const res = await fetch(`${api.url}/v1/call-events?cursor=${encodeURIComponent(cursor)}&limit=500`, { headers: { authorization: `Bearer ${p.d.token}` } });
        const page = (await res.json()) as { events: { eventId: string }[]; nextCursor: string; hasMore: boolean; gap?: unknown };
        if (page.gap) count('gap in a log');
        ids.push(...page.events.map((e) => e.eventId));
        cursor = page.nextCursor;
        if (!page.hasMore) return ids;
      }
    };
    await sleep(1000); // the relay's last batches
    for (let i = 0; i < parties.length; i += 50) {
      await Promise.all(
        parties.slice(i, i + 50).map(async (p) => {
          const log = await readLog(p);
          const got = new Set(p.events.map((e) => e.eventId));
          const logged = new Set(log);
          lost += log.filter((id) => !got.has(id)).length;
          extra += p.events.filter((e) => !logged.has(e.eventId)).length;
          const last = new Map<string, number>();
          for (const e of p.events) {
            if (Number(e.revision) <= (last.get(e.callId) ?? 0)) outOfOrder++;
            last.set(e.callId, Number(e.revision));
          }
        }),
      );
    }
    const gaps = parties.reduce((n, p) => n + p.gaps.length, 0);
    const handed = parties.reduce((n, p) => n + p.events.length, 0);
    const repeats = parties.reduce((n, p) => n + p.rawEvents, 0) - handed;
    const p99 = (xs: number[]) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(0.99 * xs.length))]! : NaN);
    const before = p99(latency.filter((l) => l.unaffected && l.atMs < killedAt).map((l) => l.ms));
    const during = p99(latency.filter((l) => l.unaffected && l.atMs >= killedAt && l.atMs <= doneAt).map((l) => l.ms));
    const at = (q: number) => (resynced.length === onA.length ? resynced[Math.min(resynced.length - 1, Math.ceil(q * resynced.length) - 1)]! : NaN);
    const stormS = (doneAt - killedAt) / 1000;
    const commands = Object.entries(commandsAfter).reduce((n, [k, v]) => n + v.calls - (commandsBefore[k]?.calls ?? 0), 0);
    const redisCpu = (redisAfter.cpuSec - redisBefore.cpuSec) / stormS;
    const cpuB = (cpuBAfter - cpuBBefore) / 1000 / stormS;
    const curve = resynced.map((ms, i) => [ms, (i + 1) / onA.length] as const);
    ctx.log(`  resynced ${resynced.length}/${onA.length}: 50 % ${fmtMs(at(0.5))}, 99 % ${fmtMs(at(0.99))}, 100 % ${fmtMs(at(1))}; lost ${lost}, repeats ${repeats} (dropped), out of order ${outOfOrder}`);
    const md = [
      `${fmtNum(parties.length)} devices in ${fmtNum(pairs.length)} pairs over two gateways (${onA.length} on A), ${z.rate} changes/s through an api/worker process (create, answer, renames, in-call messages, end). ` +
        `Gateway A killed with SIGKILL after ${z.beforeMs / 1000} s; its devices reconnect to B with the client package's backoff and full jitter and resume by cursor.`,
      '',
      mdTable(
        ['resynced', '50 %', '99 %', '100 %', 'events lost', 'repeats at the wire (dropped by eventId)', 'out of order', 'gaps', 'errors'],
        [[`${resynced.length}/${onA.length}`, fmtMs(at(0.5)), fmtMs(at(0.99)), fmtMs(at(1)), fmtNum(lost), fmtNum(repeats), fmtNum(outOfOrder), fmtNum(gaps), errorList(errors)]],
      ),
      '',
      mdTable(
        ['during the storm', 'Redis CPU', 'Redis commands', 'gateway B CPU', 'B event loop delay (max)', 'p99 of B-only pairs\' changes before / during'],
        [[`${stormS.toFixed(2)} s`, fmtPct(redisCpu), fmtNum(commands), fmtPct(cpuB), fmtMs(loopDelayMaxMs), `${fmtMs(before)} / ${fmtMs(during)}`]],
      ),
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
      data: { devices: parties.length, onA: onA.length, resyncedMs: resynced, curve, lost, extra, repeats, outOfOrder, gaps, errors, stormS, redisCpu, commands, cpuB, loopDelayMaxMs, p99BeforeMs: before, p99DuringMs: during },
      invalid: invalidReasons({
        errors: [{ where: 'the storm', errors }],
        nonZero: [
          { what: 'events handed on', n: handed },
          { what: 'changes made', n: latency.length },
        ],
        hold: [
          { ok: resynced.length === onA.length, what: `${resynced.length} of ${onA.length} devices of A resynced` },
          { ok: lost === 0, what: `${lost} events lost` },
          { ok: extra === 0, what: `${extra} events handed on that are not in the log` },
          { ok: outOfOrder === 0, what: `${outOfOrder} events out of order` },
          { ok: repeats >= 0, what: `${repeats} repeats (fewer frames than events handed on)` },
        ],
      }),
    };
  } finally {
    for (const p of parties) p.client.stop();
    await Promise.all([api, B].map((p) => ctx.stopServer(p).catch(() => {})));
    await ctx.stopServer(A).catch(() => {});
  }
}

const pct = (sorted: number[], n: number, q: number) => (sorted.length === n && n > 0 ? sorted[Math.min(n - 1, Math.ceil(q * n) - 1)]! : NaN);

export async function reconnectScenario(ctx: BenchContext): Promise<ScenarioResult> {
  const ours = await callingStorm(ctx);
  if (!ours.data) return ours;
  const z = ctx.opts.sizes.reconnect;
  const sio = await socketioStorm(ctx, z);
  const o = ours.data as { resyncedMs: number[]; onA: number };
  const at = (r: { resyncedMs: number[]; onA: number }, q: number) => pct(r.resyncedMs, r.onA, q);
  const ratio99 = at(o, 0.99) / at(sio, 0.99);
  ctx.log(`  Socket.IO: resynced ${sio.resyncedMs.length}/${sio.onA} (${sio.notRecovered} not recovered): 50 % ${fmtMs(at(sio, 0.5))}, 99 % ${fmtMs(at(sio, 0.99))}, 100 % ${fmtMs(at(sio, 1))}; lost ${sio.lost} of ${sio.sent}, repeats ${sio.repeats}, out of order ${sio.outOfOrder}`);
  const md = [
    ours.markdown,
    '',
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
  ].join('\n');
  return {
    ...ours,
    headlines: [
      ...ours.headlines,
      { metric: 'reconnect storm: 99 % resynced, ours ÷ Socket.IO with recovery', value: Number.isFinite(ratio99) ? `${ratio99.toFixed(2)}×` : 'n/a', ceiling: 'n/a', ratio: '' },
    ],
    markdown: md,
    data: { ...(ours.data as object), socketio: sio },
    invalid: [...(ours.invalid ?? []), ...invalidReasons({ errors: [{ where: 'the Socket.IO storm', errors: sio.errors }], nonZero: [{ what: 'Socket.IO packets sent', n: sio.sent }] })],
  };
}
