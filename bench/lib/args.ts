/** Command-line options and the sizes of each mode. */

export const ALL_SCENARIOS = ['micro', 'ceilings', 'lifecycle', 'webhooks', 'storm', 'group', 'idle', 'timers', 'compare', 'reconnect', 'soak', 'compareRef'] as const;
/**
 * Scenarios run only when named: the soak takes minutes (quick) to half an hour (full); webhooks
 * starts three deployments of its own (and is sized by the lifecycle scenario's sustained rate);
 * compareRef is what `--compare-ref <git ref>` runs; reconnect kills a gateway of its own and
 * holds thousands of client sockets in the bench process.
 */
export const ON_REQUEST: readonly ScenarioId[] = ['webhooks', 'reconnect', 'soak', 'compareRef'];
export type ScenarioId = (typeof ALL_SCENARIOS)[number];

/** A rate search (scenarios/callSteps.ts searchAndSustain) and what precedes it. */
export interface RateSearch {
  /**
   * Unmeasured warm-up before the search (JIT, provider sessions, pools), at `warmupRate` calls a
   * second. It must run enough calls for V8 to optimise every process's hot paths: with 150
   * lifecycles (3 s at 50/s) the first quick run sustained 113–188/s and the next runs on the same,
   * warm processes 505–633/s; with 1,000 or more the first run sustained what the warm ones did.
   */
  warmupMs: number;
  warmupRate: number;
  factor: number;
  stepMs: number;
  maxSteps: number;
  bisections: number;
  sustainedMs: number;
  /** A lifecycle not finished after this long is an error. */
  timeoutMs: number;
}

export interface Sizes {
  /** smoke: every scenario at a tiny size, to check that it runs and counts what it must (the CI test); quick; full: the goal sizes. */
  mode: 'smoke' | 'quick' | 'full';
  micro: { timeMs: number };
  ceilings: { redisMs: number; httpMs: number; httpConcurrency: number; rawSockets: number };
  lifecycle: RateSearch & {
    pairsPerGenerator: number;
    /** First rate of the search; 0: 15 % of this run's Redis-bound ceiling (100 to 2,000/s). */
    startRate: number;
    halfGoalMs: number;
    /** The saturated run (closed loop): this many lifecycles in flight for `saturatedMs`; 0: not run. */
    saturatedConcurrency: number;
    saturatedMs: number;
  };
  storm: { devices: number; rate: number; durationMs: number; pairsPerGenerator: number };
  /** The reconnect storm (scenarios/reconnect.ts): devices over two gateways, changes a second, before and after the kill. */
  /** `admissionsPerS`: the gateways' WS_ADMISSIONS_PER_S (the server's default unless --set). */
  reconnect: { devices: number; rate: number; beforeMs: number; afterMs: number; admissionsPerS: number };
  /**
   * Group calls (docs/group-calls.md): each from a caller to `members` members with
   * `installations` sockets each; `joins` join, `declines` decline, the rest ring until the
   * caller ends for all. A rate search as the lifecycle's (`startRate` 0: half the
   * lifecycle scenario's sustained rate divided by the members, at least 5/s, or 20/s without
   * it), a sustained run, then `halfMs` at half the sustained rate (10 s even in a quick run: at a
   * few group calls a second a shorter run's p99 is its slowest call).
   */
  group: RateSearch & {
    groupsPerGenerator: number;
    members: number;
    installations: number;
    joins: number;
    declines: number;
    startRate: number;
    halfMs: number;
    /** The saturated run (closed loop): this many group calls in flight for `saturatedMs`; 0: not run. */
    saturatedConcurrency: number;
    saturatedMs: number;
  };
  idle: { sockets: number; holdMs: number };
  /** `runs`: how many times the whole timers run is repeated (each run's p99 is reported). */
  timers: { calls: number; rate: number; ringTimeoutMs: number; sampleSockets: number; runs: number };
  /**
   * `pairs` of users per system, each with a socket on process A and one on process B: one
   * generator holds 2 × pairs sockets, under the 20,000 open files a process may have here
   * (bench/README.md, "Open files" under "How it measures"). Each system's saturated and
   * common-rate legs run `repeats` times, alternated: the report gives medians and spreads.
   */
  compare: {
    pairs: number;
    concurrency: number;
    throughputMs: number;
    latencyMs: number;
    repeats: number;
    /** 0: the live signals alone, without the messages and renames (to profile or sample them alone). */
    messages: number;
  };
  /**
   * `fraction` of the lifecycle scenario's sustained rate in the same run (or `rate`, when set or
   * when the lifecycle scenario did not run); `warmupMs` of the samples left out of the slopes.
   */
  soak: { durationMs: number; warmupMs: number; sampleMs: number; fraction: number; rate: number; ringTimeoutMs: number; churn: number; reconnect: number };
  /**
   * Each deployment (webhooks off, on, receiver hanging) runs `stepMs` at the lifecycle
   * scenario's sustained rate (or `rate`), then `halfMs` at half of it for the answer latency.
   */
  webhooks: { pairsPerGenerator: number; warmupMs: number; stepMs: number; halfMs: number; rate: number };
  /** --compare-ref: `runs` rounds (one run of each build) at the fixed offered `rate`. */
  compareRef: { rate: number; runs: number; warmupMs: number; stepMs: number; pairsPerGenerator: number };
}

const QUICK: Sizes = {
  mode: 'quick',
  micro: { timeMs: 150 },
  ceilings: { redisMs: 3000, httpMs: 2000, httpConcurrency: 64, rawSockets: 5000 },
  lifecycle: { pairsPerGenerator: 600, warmupMs: 10_000, warmupRate: 150, startRate: 0, factor: 1.5, stepMs: 2500, maxSteps: 5, bisections: 2, sustainedMs: 6000, halfGoalMs: 3000, timeoutMs: 5000, saturatedConcurrency: 64, saturatedMs: 4000 },
  storm: { devices: 4, rate: 250, durationMs: 3000, pairsPerGenerator: 300 },
  reconnect: { devices: 2000, rate: 100, beforeMs: 3000, afterMs: 2000, admissionsPerS: 1000 },
  group: { groupsPerGenerator: 80, members: 8, installations: 2, joins: 3, declines: 1, warmupMs: 10_000, warmupRate: 10, startRate: 0, factor: 1.5, stepMs: 2500, maxSteps: 4, bisections: 2, sustainedMs: 6000, halfMs: 10_000, timeoutMs: 5000, saturatedConcurrency: 16, saturatedMs: 4000 },
  idle: { sockets: 4000, holdMs: 1000 },
  timers: { calls: 3000, rate: 1500, ringTimeoutMs: 3000, sampleSockets: 300, runs: 1 },
  compare: { pairs: 500, concurrency: 64, throughputMs: 1500, latencyMs: 3000, repeats: 3, messages: 1 },
  soak: { durationMs: 180_000, warmupMs: 60_000, sampleMs: 60_000, fraction: 0.5, rate: 0, ringTimeoutMs: 3000, churn: 0.1, reconnect: 0.1 },
  webhooks: { pairsPerGenerator: 600, warmupMs: 2000, stepMs: 6000, halfMs: 10_000, rate: 0 },
  // 5 runs a build, even quick: with 3, runs that do not overlap happen by chance one time in 10.
  compareRef: { rate: 150, runs: 5, warmupMs: 2000, stepMs: 6000, pairsPerGenerator: 600 },
};

/**
 * A few seconds and a few dozen calls a scenario: what the bench smoke test
 * (test/e2e/bench-smoke.test.ts) runs with `--scenarios all`, to check that every scenario still
 * runs against this build and counts every event it must. Its figures mean nothing; the lifecycle
 * and group searches run at fixed low rates (one search step, no bisection) so that a busy
 * machine cannot fail them on latency.
 */
const SMOKE: Sizes = {
  mode: 'smoke',
  micro: { timeMs: 20 },
  ceilings: { redisMs: 500, httpMs: 500, httpConcurrency: 8, rawSockets: 100 },
  lifecycle: { pairsPerGenerator: 40, warmupMs: 500, warmupRate: 10, startRate: 10, factor: 1.5, stepMs: 1000, maxSteps: 1, bisections: 0, sustainedMs: 1000, halfGoalMs: 1000, timeoutMs: 10_000, saturatedConcurrency: 4, saturatedMs: 1000 },
  storm: { devices: 2, rate: 10, durationMs: 1000, pairsPerGenerator: 20 },
  reconnect: { devices: 40, rate: 10, beforeMs: 1000, afterMs: 500, admissionsPerS: 1000 },
  group: { groupsPerGenerator: 10, members: 3, installations: 2, joins: 1, declines: 1, warmupMs: 500, warmupRate: 2, startRate: 2, factor: 1.5, stepMs: 1500, maxSteps: 1, bisections: 0, sustainedMs: 1500, halfMs: 1500, timeoutMs: 10_000, saturatedConcurrency: 2, saturatedMs: 1500 },
  idle: { sockets: 50, holdMs: 200 },
  timers: { calls: 40, rate: 40, ringTimeoutMs: 1500, sampleSockets: 10, runs: 1 },
  compare: { pairs: 20, concurrency: 8, throughputMs: 500, latencyMs: 500, repeats: 1, messages: 1 },
  // A ring window a loaded machine's create → invited → answer fits in (1.5 s did not, once, in a
  // full test run at twice its usual time: an answer came after the ring-out).
  soak: { durationMs: 6000, warmupMs: 2000, sampleMs: 2000, fraction: 0.5, rate: 10, ringTimeoutMs: 4000, churn: 0.1, reconnect: 0.1 },
  webhooks: { pairsPerGenerator: 40, warmupMs: 300, stepMs: 1000, halfMs: 1000, rate: 10 },
  compareRef: { rate: 20, runs: 1, warmupMs: 500, stepMs: 1000, pairsPerGenerator: 40 },
};

const FULL: Sizes = {
  mode: 'full',
  micro: { timeMs: 1000 },
  ceilings: { redisMs: 10_000, httpMs: 10_000, httpConcurrency: 128, rawSockets: 100_000 },
  lifecycle: { pairsPerGenerator: 1500, warmupMs: 15_000, warmupRate: 150, startRate: 0, factor: 1.4, stepMs: 8000, maxSteps: 8, bisections: 2, sustainedMs: 60_000, halfGoalMs: 20_000, timeoutMs: 10_000, saturatedConcurrency: 128, saturatedMs: 15_000 },
  storm: { devices: 4, rate: 500, durationMs: 15_000, pairsPerGenerator: 300 },
  reconnect: { devices: 20_000, rate: 300, beforeMs: 10_000, afterMs: 5000, admissionsPerS: 1000 },
  group: { groupsPerGenerator: 300, members: 8, installations: 2, joins: 3, declines: 1, warmupMs: 15_000, warmupRate: 10, startRate: 0, factor: 1.4, stepMs: 8000, maxSteps: 8, bisections: 2, sustainedMs: 60_000, halfMs: 20_000, timeoutMs: 10_000, saturatedConcurrency: 32, saturatedMs: 15_000 },
  idle: { sockets: 100_000, holdMs: 30_000 },
  timers: { calls: 100_000, rate: 2500, ringTimeoutMs: 45_000, sampleSockets: 2000, runs: 3 },
  compare: { pairs: 5000, concurrency: 128, throughputMs: 15_000, latencyMs: 10_000, repeats: 5, messages: 1 },
  soak: { durationMs: 1_800_000, warmupMs: 300_000, sampleMs: 60_000, fraction: 0.5, rate: 0, ringTimeoutMs: 3000, churn: 0.1, reconnect: 0.1 },
  webhooks: { pairsPerGenerator: 1500, warmupMs: 5000, stepMs: 30_000, halfMs: 15_000, rate: 0 },
  compareRef: { rate: 150, runs: 5, warmupMs: 5000, stepMs: 20_000, pairsPerGenerator: 1500 },
};

export interface Options {
  sizes: Sizes;
  scenarios: ScenarioId[];
  generators: number;
  /** Target an existing deployment instead of starting one. */
  url?: string;
  redis?: string;
  secret?: string;
  cpuProf: boolean;
  /** Do not start the fake push providers (the server then runs without push). */
  noPush: boolean;
  /** Open-loop p99 limit for the rate search, ms. */
  p99LimitMs: number;
  /**
   * How the self-hosted server runs: `split` (default) as two processes, one with the api and
   * gateway roles and one with the worker role (relay, push, timers), so it can use two cores
   * like the docker-compose deployment; `single`: one process with every role.
   */
  topology: 'split' | 'single';
  /**
   * How the lifecycle scenario's devices answer and end: `http` requests (default), `socket`
   * command frames (docs/signaling.md "Commands"), or `both`, one search each in the same run.
   */
  over: 'http' | 'socket' | 'both';
  /**
   * Run on a local Redis Cluster of this many primaries (no replicas) instead of one Redis, with
   * the server as an api+gateway process and two worker processes sharing the relay. Only the
   * lifecycle, storm and reconnect scenarios run then.
   */
  cluster?: number;
  /**
   * Run the self-hosted server processes on this Node.js major (over a Debian trixie root's glibc,
   * as test/support/otherNode.ts makes it) instead of the bench's own Node; undefined: the bench's.
   */
  serverNode?: number;
  /** Compare this checkout with another build, this git ref (bench/scenarios/compareRef.ts). */
  compareRef?: string;
  /** CALL_RECORD_FORMAT of every server the bench starts (docs/operations.md "Upgrading"); the server's default when unset. */
  recordFormat?: 'string' | 'hash';
  /** Where the results go (default bench/results/). */
  out?: string;
  /** --server-env: settings of every server the bench starts, over the bench's own (a setting's effect, measured). */
  serverEnv?: Record<string, string>;
  /** Run each scenario this many times and report the median and spread of its figures (1: once). */
  repeat: number;
}

export function usage(): string {
  return `usage: npm run bench -- [--quick | --full | --size smoke|quick|full] [--scenarios all|${ALL_SCENARIOS.join(',')}]
                      [--generators N] [--url http://host:port --redis redis://host:port --secret S]
                      [--cpu-prof] [--no-push] [--topology split|single] [--cluster N] [--server-node N]
                      [--over http|socket|both] [--compare-ref <git ref>] [--repeat N]
                      [--record-format string|hash] [--out DIR] [--server-env KEY=VALUE ...]
                      [--set group.size=N ...]
  --quick        small sizes, under two minutes (default)
  --full         the goal sizes: 60 s sustained, 100k idle sockets, 100k pending timers
  --size S       smoke (every scenario at a tiny size: does it run and count what it must; what
                 the bench smoke test runs), quick or full
  --scenarios all every scenario, the ones run only when named (webhooks, reconnect, soak) included
  --url/--redis  target an existing deployment (and its Redis, for the ceiling); --secret (or
                 BENCH_JWT_SECRET) is its AUTH_JWT_SECRET, to mint session tokens
  --generators N fork N load generator processes and merge their histograms (default 1)
  --cpu-prof     write V8 CPU profiles of the bench's server processes to bench/results/profiles/
  --no-push      run the server without push (no fake providers): shows what push costs
  --topology T   split (default): the server as two processes, ROLES=api,gateway and
                 ROLES=worker; single: one process with every role
  --cluster N    a local Redis Cluster of N primaries, an api+gateway process and two worker
                 processes sharing the relay; runs lifecycle, storm and reconnect (when named), reports per primary
  --server-node N run the server processes on Node.js N (e.g. 24, the Docker image's) over a
                 Debian trixie root's glibc, made with debootstrap and cached on first use
  --over M       how the lifecycle's devices answer and end: http (default), socket (command
                 frames on their signaling sockets), or both (one search each, and their ratio)
  --compare-ref R this checkout against git ref R (built in a temporary worktree), at one fixed
                 rate (--set compareRef.rate=N), alternated over several runs: CPU per lifecycle
                 per process, Redis CPU and commands, as median and spread, and their ratio
  --repeat N     run each scenario N times (with --compare-ref: N rounds of the two builds,
                 alternated) and report each figure's median and spread; a spread over 20 % of
                 the median is marked unsettled
  --out DIR      write the results to DIR instead of bench/results/ (the smoke test's)
  --record-format F CALL_RECORD_FORMAT of the servers the bench starts: string (default) or hash
  --server-env K=V a setting (docs/configuration.md) of every server the bench starts, over the
                 bench's own; repeat it for more, e.g. --server-env RELAY_GATHER_MS=0
  --set g.k=N    override one size of the mode, e.g. --set lifecycle.sustainedMs=30000 --set idle.sockets=50000`;
}

export function parseArgs(argv: readonly string[]): Options {
  let sizes = QUICK;
  let scenarios: ScenarioId[] = ALL_SCENARIOS.filter((s) => !ON_REQUEST.includes(s));
  let generators = 1;
  const sets: string[] = [];
  const o: Partial<Options> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = () => {
      const v = a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    const name = a.split('=')[0];
    switch (name) {
      case '--quick':
        sizes = QUICK;
        break;
      case '--full':
        sizes = FULL;
        break;
      case '--size': {
        const v = value();
        if (v !== 'smoke' && v !== 'quick' && v !== 'full') throw new Error(`--size ${v}: smoke, quick or full`);
        sizes = v === 'smoke' ? SMOKE : v === 'quick' ? QUICK : FULL;
        break;
      }
      case '--repeat': {
        const n = Number(value());
        if (!Number.isInteger(n) || n < 1 || n > 20) throw new Error('--repeat N: 1 to 20');
        o.repeat = n;
        break;
      }
      case '--out':
        o.out = value();
        break;
      case '--record-format': {
        const f = value();
        if (f !== 'string' && f !== 'hash') throw new Error(`--record-format ${f}: string or hash`);
        o.recordFormat = f;
        break;
      }
      case '--scenarios': {
        const given = value().split(',').map((x) => x.trim()).filter(Boolean);
        // all: every scenario (the comparison of two builds is --compare-ref's).
        const list = given.includes('all') ? ALL_SCENARIOS.filter((x) => x !== 'compareRef') : given;
        for (const x of list) if (!(ALL_SCENARIOS as readonly string[]).includes(x)) throw new Error(`unknown scenario ${x}`);
        scenarios = list as ScenarioId[];
        break;
      }
      case '--generators':
        generators = Math.max(1, Number(value()) | 0);
        break;
      case '--url':
        o.url = value().replace(/\/$/, '');
        break;
      case '--redis':
        o.redis = value();
        break;
      case '--secret':
        o.secret = value();
        break;
      case '--set':
        sets.push(value());
        break;
      case '--cpu-prof':
        o.cpuProf = true;
        break;
      case '--no-push':
        o.noPush = true;
        break;
      case '--topology': {
        const t = value();
        if (t !== 'split' && t !== 'single') throw new Error(`--topology ${t}: split or single`);
        o.topology = t;
        break;
      }
      case '--cluster': {
        const n = Number(value());
        if (!Number.isInteger(n) || n < 3 || n > 9) throw new Error('--cluster N: 3 to 9 primaries');
        o.cluster = n;
        break;
      }
      case '--server-node': {
        const n = Number(value());
        if (!Number.isInteger(n) || n < 20) throw new Error('--server-node N: a Node.js major, 20 or newer');
        o.serverNode = n;
        break;
      }
      case '--over': {
        const m = value();
        if (m !== 'http' && m !== 'socket' && m !== 'both') throw new Error(`--over ${m}: http, socket or both`);
        o.over = m;
        break;
      }
      case '--compare-ref':
        o.compareRef = value();
        break;
      case '--server-env': {
        const kv = value();
        const eq = kv.indexOf('=');
        if (eq <= 0) throw new Error(`--server-env ${kv}: KEY=VALUE`);
        o.serverEnv = { ...o.serverEnv, [kv.slice(0, eq)]: kv.slice(eq + 1) };
        break;
      }
      case '--help':
      case '-h':
        throw new Error(usage());
      default:
        throw new Error(`unknown option ${a}\n${usage()}`);
    }
  }
  // e.g. --set storm.rate=100: override one size of the chosen mode.
  for (const set of sets) {
    const [path, v] = set.split('=');
    const [group, key] = (path ?? '').split('.');
    const target = (sizes as unknown as Record<string, Record<string, unknown>>)[group ?? ''];
    if (!target || !key || !(key in target) || v === undefined || !Number.isFinite(Number(v))) throw new Error(`--set ${set}: not a numeric size`);
    sizes = { ...sizes, [group!]: { ...target, [key]: Number(v) } } as Sizes;
  }
  if (o.url && !o.redis) throw new Error('--url needs --redis (the Redis-bound ceiling and timer checks read it)');
  if (o.serverEnv && o.url) throw new Error('--server-env sets the servers the bench starts: not with --url');
  if (o.serverNode && o.url) throw new Error('--server-node starts the servers: not with --url');
  if (o.cluster && o.url) throw new Error('--cluster starts its own cluster: not with --url');
  if (o.compareRef && (o.url || o.cluster)) throw new Error('--compare-ref starts its own deployments on one Redis: not with --url or --cluster');
  if (o.compareRef) {
    // Compare mode runs the comparison alone; --repeat is then its number of rounds of the two builds.
    scenarios = ['compareRef'];
    if (o.repeat) sizes = { ...sizes, compareRef: { ...sizes.compareRef, runs: o.repeat } };
  } else {
    scenarios = scenarios.filter((s) => s !== 'compareRef');
  }
  // On a cluster: the call path's scenarios and the reconnect storm (the others measure one Redis
  // or one process).
  if (o.cluster) scenarios = scenarios.filter((s) => s === 'lifecycle' || s === 'storm' || s === 'reconnect');
  return {
    sizes,
    scenarios,
    generators,
    cpuProf: o.cpuProf ?? false,
    noPush: o.noPush ?? false,
    // A smoke run checks counts, not latency: on a machine busy with the rest of npm test a step of
    // ten lifecycles can see a p99 over 50 ms, and the smoke test would fail for nothing it checks.
    p99LimitMs: sizes.mode === 'smoke' ? 5000 : 50,
    topology: o.topology ?? 'split',
    over: o.over ?? 'http',
    ...(o.cluster ? { cluster: o.cluster } : {}),
    ...(o.serverNode ? { serverNode: o.serverNode } : {}),
    ...(o.compareRef ? { compareRef: o.compareRef } : {}),
    ...(o.recordFormat ? { recordFormat: o.recordFormat } : {}),
    ...(o.out ? { out: o.out } : {}),
    ...(o.serverEnv ? { serverEnv: o.serverEnv } : {}),
    repeat: o.compareRef ? 1 : (o.repeat ?? 1),
    ...(o.url ? { url: o.url } : {}),
    ...(o.redis ? { redis: o.redis } : {}),
    ...(o.secret ? { secret: o.secret } : {}),
  };
}
