import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { cpus } from 'node:os';
import { Redis } from 'ioredis';
import type { Options } from './args.js';
import { configSchema } from '../../src/config/config.js';
import { REPO_ROOT, startRedis, startServer, type ListeningProcess, type RedisProcess, type Started } from './processes.js';
import { CpuMeter, cpuMs, machineCpu } from './procstat.js';
import { sleep } from './clock.js';
import { GeneratorPool } from './generators.js';
import type { HistogramSummary, SerializedHistogram } from './histogram.js';
import { HistogramSet } from './histogram.js';
import { runTag } from './users.js';
import type { CallCost, FixedCost } from './groupPlan.js';
import { startRedisCluster, type RedisCluster } from '../../test/support/redis-server.js';
import { nodeOnTrixie } from '../../test/support/otherNode.js';

/**
 * Everything the scenarios share: the Redis and the main server under test (started here, or
 * given with --url/--redis), the fake push providers, the ceilings measured in this run, and the
 * progress output.
 */

export interface ServerTarget {
  label: string;
  baseUrl: string;
  wsBase: string;
  /** Known when this run started the process (for RSS and CPU readings). */
  pid?: number;
}

export interface Ceilings {
  /** Redis-bound lifecycles/s by variant (bench/workers/redisCeiling.ts). */
  redis?: {
    /** The ceiling used for ratios: lifecycles/s at which Redis's CPU is saturated. */
    lifecycle: number;
    create: number;
    /** Throughput the pipelining client reached (lower when the client, not Redis, was the limit). */
    measured: { lifecycle: number; create: number };
    redisCpuShare: number;
    clientCpuShare: number;
  };
  /** Raw uWebSockets.js HTTP requests/s (bench/ceilings/uwsHello.ts). */
  http?: { requestsPerSecond: number; generatorBound: boolean };
  /** CPU one unpipelined Redis round trip (PING) costs on this machine, client and Redis, µs. */
  roundTrip?: { clientUs: number; redisUs: number };
  /** Raw uWebSockets.js memory per idle WebSocket, bytes. */
  rawWsBytesPerSocket?: number;
}

export interface PushState {
  /** Whether the server under test was given the fake providers' settings. */
  configured: boolean;
  /** Why push is not measured, when it is not. */
  reason?: string;
  env?: Record<string, string>;
  bundleId?: string;
  androidAppId?: string;
}

export interface PushCollect {
  hist: Record<string, SerializedHistogram>;
  statuses: Record<string, number>;
  unmatched: number;
}

export class BenchContext {
  /** Names this run's users, calls and key prefixes; `--repeat` gives each run of a scenario its own (run.ts). */
  tag = runTag();
  readonly secret: string;
  readonly selfHosted: boolean;
  redisUrl = '';
  redisProc: RedisProcess | undefined;
  /** With --cluster: the local cluster, and one INFO connection per primary. */
  cluster: RedisCluster | undefined;
  private nodeInfo: Redis[] = [];
  main!: ServerTarget;
  mainProc: ListeningProcess | undefined;
  /** The worker-role process of a split topology (relay, push, timers). */
  workerProc: ListeningProcess | undefined;
  readonly ceilings: Ceilings = {};
  /** Figures one scenario finds and a later one sizes itself by. */
  readonly findings: {
    sustainedLifecycleRate?: number;
    idleBytesPerSocket?: number;
    /**
     * The one-to-one sustained run's cost per lifecycle, its rate, and the deployment's cost at
     * rest: what the group scenario compares a member with.
     */
    oneToOneCost?: CallCost & { rate: number; rest: FixedCost };
  } = {};
  push: PushState = { configured: false, reason: 'push not set up' };
  private pushFakes: GeneratorPool | undefined;
  private readonly extra: Started[] = [];
  private info: Redis | undefined;
  readonly profileDir: string | undefined;
  readonly startedAt = Date.now();

  constructor(readonly opts: Options) {
    this.selfHosted = !opts.url;
    this.secret = opts.secret ?? process.env.BENCH_JWT_SECRET ?? (this.selfHosted ? `bench-${randomBytes(24).toString('hex')}` : '');
    if (!this.secret) throw new Error('--url needs --secret (or BENCH_JWT_SECRET): the AUTH_JWT_SECRET of the target, to mint session tokens');
    this.profileDir = opts.cpuProf ? join(REPO_ROOT, 'bench/results/profiles') : undefined;
    if (this.profileDir) mkdirSync(this.profileDir, { recursive: true });
  }

  log(line: string): void {
    process.stdout.write(`${line}\n`);
  }

  /** Starts (or attaches to) Redis, the fake push providers and the main server. */
  async start(): Promise<void> {
    if (this.selfHosted && this.opts.cluster) {
      this.cluster = await startRedisCluster(this.opts.cluster);
      this.redisUrl = `redis://${this.cluster.nodes[0]!.host}:${this.cluster.nodes[0]!.port}`;
      this.nodeInfo = this.cluster.nodes.map((n) => new Redis({ host: n.host, port: n.port, maxRetriesPerRequest: 2 }));
      for (const r of this.nodeInfo) r.on('error', () => {});
      this.log(`redis cluster: ${this.cluster.nodes.length} primaries ${this.cluster.seedList} (no replicas, --save '' --appendonly no)`);
    } else if (this.selfHosted) {
      this.redisProc = await startRedis();
      this.redisUrl = this.redisProc.url;
      this.log(`redis-server ${this.redisUrl} (pid ${this.redisProc.pid}, --save '' --appendonly no)`);
    }
    if (this.selfHosted && this.opts.compareRef) {
      // The comparison starts each build's deployment for each run; nothing else may run meanwhile
      // (an idle deployment's reads and sweeps would count in Redis's figures).
      await this.startPushFakes();
      this.main = { label: 'none', baseUrl: '', wsBase: '' };
      this.log(`push: ${this.push.configured ? 'fake APNs + FCM' : `not measured: ${this.push.reason}`}; the deployments start per run`);
    } else if (this.selfHosted) {
      await this.startPushFakes();
      const { server, worker } = await this.startDeployment('server', {});
      this.mainProc = server;
      this.workerProc = worker;
      this.main = this.targetOf(this.mainProc);
      this.detectPushWiring(this.mainProc.logs());
      this.log(`server ${this.main.baseUrl} (pid ${this.mainProc.pid}${this.workerProc ? `; worker process pid ${this.workerProc.pid}` : ''}); push: ${this.push.configured ? 'fake APNs + FCM' : `not measured: ${this.push.reason}`}`);
    } else {
      this.redisUrl = this.opts.redis!;
      const u = new URL(this.opts.url!);
      this.main = { label: 'server', baseUrl: this.opts.url!, wsBase: `${u.protocol === 'https:' ? 'wss' : 'ws'}://${u.host}` };
      this.push = { configured: false, reason: 'targeting an existing deployment: its push providers are not ours to watch' };
      this.log(`target ${this.main.baseUrl}, redis ${this.redisUrl}`);
    }
    this.info = new Redis(this.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 2 });
    this.info.on('error', () => {});
    await this.info.connect();
  }

  targetOf(p: ListeningProcess): ServerTarget {
    return { label: p.label, baseUrl: p.url, wsBase: p.url.replace(/^http/, 'ws'), pid: p.pid };
  }

  /** With --server-node: the command that runs that Node.js (made on first use). */
  private serverNode: string[] | undefined;

  /** What the main server process reported running on: its Node.js and uWebSockets.js. */
  serverRuntime(): string | undefined {
    const { node, uws } = this.mainProc?.listening ?? {};
    return typeof node === 'string' ? `${node} (uWebSockets.js: ${typeof uws === 'string' ? uws : 'unknown'})` : undefined;
  }

  /**
   * Starts one more real server process on the bench's Redis (self-hosted runs only); `root`: the
   * checkout to run it from (another build's, --compare-ref), this one by default.
   */
  async startServer(label: string, env: Record<string, string>, root?: string): Promise<ListeningProcess> {
    if (!this.selfHosted) throw new Error(`${label}: cannot start servers when targeting --url`);
    const p = await startServer({
      ...(root ? { root } : {}),
      label,
      redisUrl: this.cluster ? { cluster: this.cluster.seedList } : this.redisUrl,
      secret: this.secret,
      env: { ...BENCH_LIMITS, ...(this.opts.sizes.mode === 'smoke' ? SMOKE_SERVER_ENV : {}), ...(this.cluster ? clusterSettings(this.cluster.nodes.length) : {}), ...(this.push.configured ? this.push.env : {}), ...(this.opts.recordFormat ? { CALL_RECORD_FORMAT: this.opts.recordFormat } : {}), ...env, ...this.opts.serverEnv },
      ...(this.profileDir ? { cpuProfDir: this.profileDir } : {}),
      ...(this.opts.serverNode ? { node: (this.serverNode ??= nodeOnTrixie(this.opts.serverNode)) } : {}),
    });
    if (label !== 'server') this.extra.push(p);
    return p;
  }

  /**
   * Starts the server as --topology says: one process with every role, or (split) an
   * `api,gateway` process plus a `worker` process (`<label>-worker`) with the same settings.
   */
  async startDeployment(label: string, env: Record<string, string>, root?: string): Promise<{ server: ListeningProcess; worker?: ListeningProcess }> {
    if (this.opts.topology !== 'split' && !this.cluster) return { server: await this.startServer(label, env, root) };
    // Both at once: a server process spends most of its start compiling, and there are two cores.
    const [server, worker] = await Promise.all([
      this.startServer(label, { ...env, ROLES: 'api,gateway' }, root),
      this.startServer(`${label}-worker`, { ...env, ROLES: 'worker' }, root),
    ]);
    // On a cluster, a second worker shares the relay's shards and the queues.
    if (this.cluster) this.secondWorker = await this.startServer(`${label}-worker-2`, { ...env, ROLES: 'worker' }, root);
    return { server, worker };
  }

  /**
   * Runs `fn` with deployment `d` measured as the main one (its URL for new generator pools, its
   * processes' CPU in steps, its idleness awaited), then puts the main deployment back.
   */
  async asMain<T>(d: { server: ListeningProcess; worker?: ListeningProcess | undefined }, fn: () => Promise<T>): Promise<T> {
    const saved = { main: this.main, mainProc: this.mainProc, workerProc: this.workerProc };
    this.main = this.targetOf(d.server);
    this.mainProc = d.server;
    this.workerProc = d.worker;
    try {
      return await fn();
    } finally {
      Object.assign(this, saved);
    }
  }

  /** With --cluster: the second worker process of the main deployment. */
  secondWorker: ListeningProcess | undefined;

  /** Per primary (--cluster): commands and CPU seconds so far, by node address. */
  async perPrimary(): Promise<{ node: string; calls: number; cpuSec: number }[]> {
    return Promise.all(
      this.nodeInfo.map(async (r) => {
        const [stats, info] = await Promise.all([r.info('commandstats'), r.info('cpu')]);
        let calls = 0;
        for (const m of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) if (m[1] !== 'info') calls += Number(m[2]);
        const num = (k: string) => Number(new RegExp(`^${k}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
        return { node: `${r.options.host}:${r.options.port}`, calls, cpuSec: num('used_cpu_user') + num('used_cpu_sys') };
      }),
    );
  }

  async stopServer(p: Started): Promise<void> {
    await p.stop();
    const i = this.extra.indexOf(p);
    if (i >= 0) this.extra.splice(i, 1);
  }

  track(p: Started): void {
    this.extra.push(p);
  }

  // ---------- push fakes ----------

  private async startPushFakes(): Promise<void> {
    if (this.opts.noPush) {
      this.push = { configured: false, reason: 'disabled with --no-push' };
      return;
    }
    try {
      this.pushFakes = await GeneratorPool.start(1, 'pushFakes', () => ({}));
      const info = this.pushFakes.setupInfo[0] as { env: Record<string, string>; bundleId: string; androidAppId: string };
      this.push = { configured: true, env: info.env, bundleId: info.bundleId, androidAppId: info.androidAppId };
    } catch (err) {
      this.push = { configured: false, reason: `the fake providers did not start: ${(err as Error).message.split('\n')[0]}` };
    }
  }

  /** The server says at start when it runs without push senders. */
  private detectPushWiring(logs: string): void {
    if (!this.push.configured) return;
    if (/push is not configured/.test(logs)) {
      this.push = { ...this.push, configured: false, reason: 'push unconfigured (the server started without push senders: "push is not configured")' };
    }
  }

  get pushFakePid(): number | undefined {
    return this.pushFakes?.pids()[0];
  }

  /** Tells the fakes which generator (UDP port) to announce the pushes of each `<tag>.<gen>` to. */
  async routePush(routes: Record<string, number>): Promise<void> {
    if (this.pushFakes && this.push.configured) await this.pushFakes.run(() => ({ op: 'route', routes }));
  }

  /** The push latencies the fakes saw since the last collect (and resets them). */
  async collectPush(): Promise<PushCollect | undefined> {
    if (!this.pushFakes) return undefined;
    const [out] = await this.pushFakes.run<PushCollect>(() => ({ op: 'collect' }));
    return out?.result;
  }

  // ---------- measurements shared by scenarios ----------

  async redisInfoText(): Promise<string> {
    return this.info!.info();
  }

  /** INFO of every primary (--cluster) or of the one Redis. */
  private async infoTexts(section?: string): Promise<string[]> {
    const clients = this.nodeInfo.length > 0 ? this.nodeInfo : [this.info!];
    return Promise.all(clients.map((c) => (section ? c.info(section) : c.info())));
  }

  /** Per-command call counts and time from INFO commandstats (commands run inside scripts included). */
  async commandStats(): Promise<Record<string, { calls: number; usec: number }>> {
    const out: Record<string, { calls: number; usec: number }> = {};
    // Summed over the primaries on a cluster.
    for (const text of await this.infoTexts('commandstats')) {
      for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
        const prev = out[m[1]!] ?? { calls: 0, usec: 0 };
        out[m[1]!] = { calls: prev.calls + Number(m[2]), usec: prev.usec + Number(m[3]) };
      }
    }
    return out;
  }

  /** How many keys Redis holds (DBSIZE, summed over the primaries on a cluster). */
  async redisKeys(): Promise<number> {
    const clients = this.nodeInfo.length > 0 ? this.nodeInfo : [this.info!];
    return (await Promise.all(clients.map((c) => c.dbsize()))).reduce((a, b) => a + b, 0);
  }

  /**
   * MEMORY USAGE of up to `maxKeys` hashes or sorted sets whose names match `match` (SCAN), and
   * how many fields or members they hold: memory per record of a kind (call history).
   */
  async keyMemory(match: string, maxKeys = 200): Promise<{ keys: number; bytes: number; fields: number }> {
    const out = { keys: 0, bytes: 0, fields: 0 };
    for (const c of this.nodeInfo.length > 0 ? this.nodeInfo : [this.info!]) {
      let cursor = '0';
      do {
        const [next, batch] = await c.scan(cursor, 'MATCH', match, 'COUNT', 1000);
        cursor = next;
        for (const k of batch) {
          if (out.keys >= maxKeys) return out;
          const [bytes, fields] = await Promise.all([c.memory('USAGE', k, 'SAMPLES', '0'), (await c.type(k)) === 'zset' ? c.zcard(k) : c.hlen(k)]);
          out.keys++;
          out.bytes += Number(bytes ?? 0);
          out.fields += fields;
        }
      } while (cursor !== '0');
    }
    return out;
  }

  /** Redis's own CPU seconds (user + sys) and memory, from INFO (works for any Redis). */
  async redisInfo(): Promise<{ cpuSec: number; usedMemory: number; clients: number; readsProcessed: number }> {
    // Summed over the primaries on a cluster.
    const texts = await this.infoTexts();
    const num = (k: string) => texts.reduce((sum, text) => sum + Number(new RegExp(`^${k}:([\\d.]+)`, 'm').exec(text)?.[1] ?? NaN), 0);
    return {
      cpuSec: num('used_cpu_user') + num('used_cpu_sys'),
      usedMemory: num('used_memory'),
      clients: num('connected_clients'),
      // Read events on client connections: one per batch of commands a client sent at once.
      readsProcessed: num('total_reads_processed'),
    };
  }

  /** Starts measuring CPU of the server processes, Redis and the machine. */
  async cpuWindow(extraPids: Record<string, number | undefined> = {}): Promise<() => Promise<CpuShares>> {
    const meter = new CpuMeter({
      server: this.main.pid,
      'server worker': this.workerProc?.pid,
      ...(this.secondWorker ? { 'server worker 2': this.secondWorker.pid } : {}),
      'push fakes': this.pushFakePid,
      ...extraPids,
    }).begin();
    const r0 = await this.redisInfo();
    const m0 = machineCpu();
    const t0 = performance.now();
    return async () => {
      const shares = meter.end();
      const r1 = await this.redisInfo();
      const m1 = machineCpu();
      const wall = (performance.now() - t0) / 1000;
      shares.redis = (r1.cpuSec - r0.cpuSec) / wall;
      const machine = (m1.busy - m0.busy) / Math.max(1, m1.total - m0.total);
      const ours = Object.values(shares).reduce((a, b) => a + b, 0);
      return { processes: shares, machineBusy: machine, otherCores: Math.max(0, machine * cpus().length - ours), remoteTarget: !this.selfHosted };
    };
  }

  /**
   * Waits until the server processes are idle again (each under 10 % of a core for half a
   * second), so a backlog left by an overloaded step does not spill into the next one. Returns
   * how long it took. Without pids: the main server and, in a split topology, its worker.
   */
  async waitIdle(maxMs: number, pids: (number | undefined)[] = [this.main.pid, this.workerProc?.pid]): Promise<number> {
    const watched = pids.filter((p): p is number => p !== undefined);
    if (watched.length === 0) return 0;
    const t0 = performance.now();
    let quiet = 0;
    let last = watched.map((p) => cpuMs(p) ?? 0);
    while (performance.now() - t0 < maxMs) {
      await sleep(250);
      const now = watched.map((p) => cpuMs(p) ?? 0);
      quiet = now.every((ms, i) => ms - last[i]! < 25) ? quiet + 1 : 0;
      last = now;
      if (quiet >= 2) break;
    }
    return performance.now() - t0;
  }

  /**
   * Loopback source addresses for `sockets` client sockets: each address has ~28k ephemeral
   * ports, and each use (`block`) gets its own addresses so that ports still in TIME_WAIT from
   * an earlier phase do not slow down binding either.
   */
  localAddresses(sockets: number, block: number): string[] {
    // Binding a source port gets slower the more ports of that address are taken (the kernel
    // searches the range): a few thousand sockets per address keep connecting fast.
    const n = Math.min(250, Math.max(1, Math.ceil(sockets / 2500)));
    return Array.from({ length: n }, (_, i) => `127.0.${block}.${i + 1}`);
  }

  async close(): Promise<void> {
    for (const p of [...this.extra].reverse()) await p.stop().catch(() => {});
    await this.mainProc?.stop().catch(() => {});
    await this.workerProc?.stop().catch(() => {});
    await this.pushFakes?.close().catch(() => {});
    this.info?.disconnect();
    await this.secondWorker?.stop().catch(() => {});
    for (const r of this.nodeInfo) r.disconnect();
    await this.cluster?.stop().catch(() => {});
    await this.redisProc?.stop().catch(() => {});
  }
}

/**
 * A smoke run shares the machine with the rest of npm test: its servers wait for Redis 5 s, as the
 * tests' servers do (test/support/server.ts), not the production 500 ms. A worker starting while
 * the suite's first files started beside it once timed out and exited.
 */
const SMOKE_SERVER_ENV: Record<string, string> = { REDIS_COMMAND_TIMEOUT_MS: '5000' };

/**
 * The abuse limits of the servers the bench starts, raised far above what a bench user does (a
 * few users make thousands of calls a minute here); the limiters still run, so their cost is
 * measured. Only variables this version of the config knows are set.
 */
export const BENCH_LIMITS: Record<string, string> = Object.fromEntries(
  Object.entries({ RATE_CALL_CREATES_PER_MIN: '100000000', RATE_INVITES_PER_CALLEE_PER_MIN: '100000000', RATE_PUSH_TOKEN_WRITES_PER_HOUR: '100000000', WS_ADMISSIONS_PER_S: '1000000' }).filter(([k]) => k in configSchema.shape),
);

export interface CpuShares {
  /** Share of one core per process over the window (1 = one full core). */
  processes: Record<string, number>;
  /** Share of the whole machine (all cores) that was busy. */
  machineBusy: number;
  /** Cores used by processes this run did not start or does not watch (other work on the machine). */
  otherCores: number;
  /** Targeting --url: the server's CPU is among the other processes'. */
  remoteTarget: boolean;
}

/** Merges the generators' serialised histograms of one run. */
export function mergeHists(list: readonly Record<string, SerializedHistogram>[], order?: readonly string[]): Record<string, HistogramSummary> {
  const set = new HistogramSet();
  for (const h of list) set.mergeSerialized(h);
  return set.summaries(order);
}

/**
 * On a cluster: 16 call shards (8 hash tags fall 2/4/2 on 3 primaries' default slot ranges, 16
 * fall 6/6/4) and a queue partition per primary, as docs/operations.md "Redis Cluster" advises.
 */
function clusterSettings(primaries: number): Record<string, string> {
  return { CALL_SHARDS: '16', QUEUE_PARTITIONS: String(primaries) };
}
