import { connect } from 'node:net';
import { invalidReasons } from '../lib/validity.js';
import { once } from 'node:events';
import type { BenchContext } from '../lib/context.js';
import { GeneratorPool, generatorCpu } from '../lib/generators.js';
import { Histogram } from '../lib/histogram.js';
import { startHelper } from '../lib/processes.js';
import { nowMs } from '../lib/clock.js';
import { errorList, fmtMs, fmtNum, fmtPct, fmtRate, mdTable, type Headline, type ScenarioResult } from '../lib/report.js';
import type { CeilingResult, CeilingSetup, CeilingVariant } from '../workers/redisCeiling.js';
import type { HttpLoadResult, HttpLoadSetup } from '../workers/httpLoad.js';
import { describeBound } from './callSteps.js';

/**
 * The limits of this machine, measured in the same run as everything compared with them:
 *  - Redis-bound: lifecycles/s when only the project's Redis work runs (bench/workers/redisCeiling.ts);
 *  - raw uWS HTTP: requests/s of a minimal uWebSockets.js app, loaded by the same generator.
 */
export async function ceilingsScenario(ctx: BenchContext): Promise<ScenarioResult> {
  const z = ctx.opts.sizes.ceilings;
  const headlines: Headline[] = [];
  const md: string[] = [];
  const data: Record<string, unknown> = {};

  // ---- Redis-bound ----
  const pool = await GeneratorPool.start(ctx.opts.generators, 'redisCeiling', () => ({ redisUrl: ctx.redisUrl, prefix: `bcl${ctx.tag}`, users: 1000, ringTimeoutMs: 45_000, ...(ctx.opts.recordFormat ? { recordFormat: ctx.opts.recordFormat } : {}) }) satisfies CeilingSetup);
  const variants: CeilingVariant[] = ['lifecycle', 'create'];
  const rows: string[][] = [];
  const per: Partial<Record<CeilingVariant, { r: CeilingResult; redisShare: number; clientShare: number; bound: string; ceiling: number; redisMsPer: number }>> = {};
  try {
    for (const variant of variants) {
      const stop = await ctx.cpuWindow(Object.fromEntries(pool.pids().map((p, i) => [`ceiling client ${i}`, p])));
      const outs = await pool.run<CeilingResult>(() => ({ variant, durationMs: z.redisMs / variants.length, startAtMs: nowMs() + 100, batch: 40, lanes: 4 }));
      const cpu = await stop();
      const r: CeilingResult = {
        variant,
        lifecycles: outs.reduce((a, o) => a + o.result.lifecycles, 0),
        perSecond: outs.reduce((a, o) => a + o.result.perSecond, 0),
        commandsPerLifecycle: outs[0]!.result.commandsPerLifecycle,
        errors: Object.assign({}, ...outs.map((o) => o.result.errors)) as Record<string, number>,
        wallMs: Math.max(...outs.map((o) => o.result.wallMs)),
        published: outs.reduce((a, o) => a + o.result.published, 0),
      };
      const redisShare = cpu.processes.redis ?? 0;
      const clientShare = Math.max(...outs.map((o) => o.cpu.share));
      // When the client, not Redis, was the limit, the Redis-bound ceiling is where Redis's own
      // CPU per lifecycle (measured here) would fill its one core.
      const saturated = redisShare >= 0.85;
      const ceiling = saturated ? r.perSecond : r.perSecond / Math.max(redisShare, 0.01);
      const redisMsPer = (redisShare * 1000) / Math.max(r.perSecond, 1e-9);
      const bound = saturated
        ? `Redis CPU (${fmtPct(redisShare)} of a core)`
        : clientShare >= 0.85
          ? `the pipelining client's CPU (${fmtPct(clientShare)} of a core) reached ${fmtRate(r.perSecond)} with Redis at ${fmtPct(redisShare)}; Redis's ${redisMsPer.toFixed(3)} ms of CPU per lifecycle puts the Redis-bound ceiling at ${fmtRate(ceiling)}`
          : `${describeBound(cpu, false, clientShare)}; Redis-bound ceiling from Redis CPU per lifecycle: ${fmtRate(ceiling)}`;
      per[variant] = { r, redisShare, clientShare, bound, ceiling, redisMsPer };
      rows.push([variant, fmtRate(ceiling), fmtRate(r.perSecond), fmtPct(redisShare), `${redisMsPer.toFixed(3)} ms`, fmtNum(r.commandsPerLifecycle, 1), fmtPct(clientShare), errorList(r.errors), bound]);
      ctx.log(`  redis-bound ${variant}: ceiling ${fmtRate(ceiling)} (client reached ${fmtRate(r.perSecond)}, Redis CPU ${fmtPct(redisShare)}, client ${fmtPct(clientShare)}), errors ${errorList(r.errors)}`);
    }
  } finally {
    await pool.close();
  }
  const lc = per.lifecycle!;
  ctx.ceilings.redis = {
    lifecycle: lc.ceiling,
    create: per.create!.ceiling,
    measured: { lifecycle: lc.r.perSecond, create: per.create!.r.perSecond },
    redisCpuShare: lc.redisShare,
    clientCpuShare: lc.clientShare,
  };
  data.redis = per;
  headlines.push({
    metric: 'Redis-bound ceiling: lifecycles/s',
    value: `${fmtRate(lc.ceiling)} (client reached ${fmtRate(lc.r.perSecond)})`,
    ceiling: 'itself',
    ratio: '1.00×',
    bound: lc.bound,
  });
  md.push(
    '### Redis-bound ceiling',
    '',
    'A separate ioredis client pipelines exactly the Redis work of one lifecycle, with the project\'s own scripts and key/argument builders ' +
      '(`createCallKeysArgs`, `answerCallKeysArgs`, `endCallKeysArgs`, `EventLog.appendUsersCall`, `deliveriesFor`, `busyMarkerOps`): per mutation the operation-binding ' +
      '`SET NX GET` and the call script (whose ring index entry is the ring timer); per create the callee\'s busy marker `HGET`; per change the relay\'s `appendEvents` (one call for the change\'s users) ' +
      '(XADD + SPUBLISH to subscribed channels, busy markers and the push registrations the push handler needs in the same script), the outbox `XREADGROUP` and `XACK`; per create the invited call\'s read for its push (the project\'s reader, `readStoredCall`: a `GET`). ' +
      'Batches of 40 lifecycles, 4 in flight. No HTTP, WebSocket or server in between: what Redis alone allows. ' +
      'Not included: the ring sweeps (a few commands per second per shard whatever the rate) and the reads a gateway makes when a socket connects.',
    '',
    'The ceiling is the rate at which Redis\'s single thread is saturated: measured directly when the client drives Redis to ≥ 85 % of a core, otherwise ' +
      'the client\'s throughput divided by Redis\'s measured share of a core (Redis CPU per lifecycle, from INFO used_cpu, is what a faster client could not change).',
    '',
    mdTable(['variant', 'Redis-bound ceiling (lifecycles/s)', 'client reached', 'Redis CPU', 'Redis CPU per lifecycle', 'Redis commands per lifecycle (client-side)', 'client CPU', 'errors', 'bound'], rows),
    '',
  );

  // ---- one round trip ----
  const rt = await roundTripCost(ctx, z.redisMs / 6);
  ctx.ceilings.roundTrip = rt;
  data.roundTrip = rt;
  ctx.log(`  one Redis round trip (PING, not pipelined): ${rt.clientUs.toFixed(0)} µs of client CPU + ${rt.redisUs.toFixed(0)} µs of Redis CPU`);
  headlines.push({
    metric: 'CPU per unpipelined Redis round trip (client + Redis)',
    value: `${rt.clientUs.toFixed(0)} µs + ${rt.redisUs.toFixed(0)} µs`,
    ceiling: 'itself',
    ratio: '1.00×',
    bound: `on this machine a round trip's cost is mostly the kernel's (loopback TCP write and wake-up on both sides): ${fmtNum(1e6 / (rt.clientUs + rt.redisUs))} round trips/s per core in all`,
  });
  md.push(
    '### Cost of one Redis round trip',
    '',
    `One client sends \`PING\` and waits for the answer, ${fmtNum(rt.count)} times on a raw socket: ${rt.clientUs.toFixed(1)} µs of its CPU and ` +
      `${rt.redisUs.toFixed(1)} µs of Redis's per round trip. The server pays this for every batch of commands it cannot pipeline with others ` +
      '(the lifecycle report counts them per lifecycle from Redis\'s `total_reads_processed`).',
    '',
  );

  // ---- raw uWS HTTP ----
  if (ctx.selfHosted) {
    const hello = await startHelper('uws-hello', 'bench/ceilings/uwsHello.ts', {});
    ctx.track(hello);
    const http = await GeneratorPool.start(ctx.opts.generators, 'httpLoad', () => ({ baseUrl: hello.url, secret: ctx.secret, connections: z.httpConcurrency }) satisfies HttpLoadSetup);
    try {
      const stop = await ctx.cpuWindow({ 'uws-hello': hello.pid, ...Object.fromEntries(http.pids().map((p, i) => [`generator ${i}`, p])) });
      const outs = await http.run<HttpLoadResult>(() => ({ concurrency: Math.ceil(z.httpConcurrency / http.size), durationMs: z.httpMs, startAtMs: nowMs() + 200 }));
      const cpu = await stop();
      const rps = outs.reduce((a, o) => a + o.result.perSecond, 0);
      const hist = new Histogram();
      for (const o of outs) hist.merge(o.result.hist);
      const lat = hist.summary();
      const gen = generatorCpu(outs);
      const bound = describeBound(cpu, gen.bound, gen.maxShare);
      ctx.ceilings.http = { requestsPerSecond: rps, generatorBound: gen.bound };
      data.http = { rps, latency: lat, cpu, generator: gen, errors: outs.map((o) => o.result.errors) };
      ctx.log(`  raw uWS HTTP: ${fmtRate(rps)} requests (p99 ${fmtMs(lat.p99)}); ${bound}`);
      headlines.push({ metric: 'raw uWS HTTP ceiling: requests/s', value: fmtRate(rps), ceiling: 'itself', ratio: '1.00×', bound });
      md.push(
        '### Raw uWebSockets.js HTTP ceiling',
        '',
        `A minimal uWebSockets.js app (\`bench/ceilings/uwsHello.ts\`: read the body, answer a tiny JSON) in its own process, loaded by the same generator ` +
          `(undici, keep-alive, ${z.httpConcurrency} requests in flight, the create request's headers and body) for ${z.httpMs / 1000} s.`,
        '',
        mdTable(
          ['requests/s', 'p50', 'p99', 'max', 'errors', 'bound'],
          [[fmtRate(rps), fmtMs(lat.p50), fmtMs(lat.p99), fmtMs(lat.max), errorList(Object.assign({}, ...outs.map((o) => o.result.errors)) as Record<string, number>), bound]],
        ),
        '',
        gen.bound
          ? 'The generator was the bottleneck here, so this ceiling is a lower bound of what uWS itself can do on this machine (with server and generator sharing 2 cores, it is also what this machine can drive).'
          : '',
      );
    } finally {
      await http.close();
      await ctx.stopServer(hello);
    }
  } else {
    md.push('### Raw uWebSockets.js HTTP ceiling', '', 'Not measured: targeting an existing deployment (the raw app runs on the bench machine).');
  }

  const httpData = data.http as { rps: number; errors: Record<string, number>[] } | undefined;
  const invalid = invalidReasons({
    errors: [
      ...Object.entries(per).map(([variant, v]) => ({ where: `the Redis-bound ${variant} ceiling`, errors: v!.r.errors })),
      ...(httpData ? [{ where: 'the raw uWS HTTP ceiling', errors: Object.assign({}, ...httpData.errors) as Record<string, number> }] : []),
    ],
    nonZero: [
      ...Object.entries(per).map(([variant, v]) => ({ what: `the Redis-bound ${variant} ceiling's lifecycles/s`, n: v!.r.perSecond })),
      ...(httpData ? [{ what: 'raw uWS HTTP requests/s', n: httpData.rps }] : []),
    ],
  });
  return { id: 'ceilings', title: 'Limits of this machine (ceilings)', headlines, goals: [], markdown: md.join('\n'), data, invalid };
}

/** CPU of one unpipelined round trip: sequential PINGs on a raw socket from this process. */
async function roundTripCost(ctx: BenchContext, durationMs: number): Promise<{ clientUs: number; redisUs: number; count: number }> {
  const url = new URL(ctx.redisUrl);
  const socket = connect(Number(url.port || 6379), url.hostname);
  await once(socket, 'connect');
  socket.setNoDelay(true);
  try {
    const r0 = await ctx.redisInfo();
    const c0 = process.cpuUsage();
    const end = performance.now() + durationMs;
    let count = 0;
    await new Promise<void>((resolve, reject) => {
      socket.on('error', reject);
      socket.on('data', (chunk: Buffer) => {
        // One '+PONG\r\n' per reply; a reply never spans two reads at this size, but count bytes to be safe.
        count += Math.floor(chunk.length / 7);
        if (performance.now() < end) socket.write('PING\r\n');
        else resolve();
      });
      socket.write('PING\r\n');
    });
    const c = process.cpuUsage(c0);
    const r1 = await ctx.redisInfo();
    return { clientUs: (c.user + c.system) / count, redisUs: ((r1.cpuSec - r0.cpuSec) * 1e6) / count, count };
  } finally {
    socket.destroy();
  }
}
