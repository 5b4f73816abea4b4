import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Socket } from 'node:net';
import { freePort } from '../../src/redis/embedded.js';
import { configSchema } from '../../src/config/config.js';
import { sleep } from './clock.js';
import { rssBytes } from './procstat.js';
import { buildServerBundle } from '../../scripts/serverBundle.js';

/**
 * The processes a bench run starts: its own redis-server (no persistence), real server
 * processes (src/main.ts compiled once per run, scripts/serverBundle.ts: the same code as
 * production runs), and helper servers (the Socket.IO comparison, the raw uWS ceiling). Every one is
 * killed when the bench exits, whatever happens.
 */

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export interface Started {
  label: string;
  pid: number;
  child: ChildProcess;
  /** Everything the process printed (stdout and stderr). */
  logs(): string;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

/** Kills `child` when the bench exits, whatever happens. */
export function track(child: ChildProcess): void {
  running.add(child);
  child.once('exit', () => running.delete(child));
}

function stopper(child: ChildProcess, killAfterMs = 5000): () => Promise<void> {
  return async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    const killer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    child.kill('SIGTERM');
    await exited;
    clearTimeout(killer);
  };
}

export interface RedisProcess extends Started {
  url: string;
  port: number;
}

/**
 * A redis-server on a free loopback port with persistence off (`--save '' --appendonly no`): the
 * bench measures the call path, not the disk. (The project's `startEmbeddedRedis` turns
 * append-only persistence on, which a production deployment would choose for itself.) `--hz 100`
 * as docs/operations.md recommends for ring-timer precision.
 */
export async function startRedis(): Promise<RedisProcess> {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'warning', '--maxclients', '10000', '--hz', '100'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  track(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`redis-server exited: ${out}`);
    if (await pingRedis(port)) break;
    if (i > 200) throw new Error('redis-server did not start');
    await sleep(25);
  }
  return { label: 'redis', pid: child.pid!, child, url: `redis://127.0.0.1:${port}`, port, logs: () => out, stop: stopper(child) };
}

function pingRedis(port: number): Promise<boolean> {
  return new Promise((res) => {
    const s = new Socket();
    s.once('connect', () => s.write('PING\r\n'));
    s.once('data', (d) => {
      s.destroy();
      res(d.toString().startsWith('+PONG'));
    });
    s.once('error', () => res(false));
    s.connect(port, '127.0.0.1');
  });
}

export interface ListeningProcess extends Started {
  port: number;
  url: string;
  /** The process's `listening` log line (the server's names its Node.js and uWebSockets.js build). */
  listening: Record<string, unknown>;
}

/**
 * How long a process may take to say it listens. A server starts in a few seconds; on a loaded
 * machine (the bench smoke test beside the rest of `npm test`, whose Redis Clusters and browsers
 * share two cores) one once took more than 30 s.
 */
const START_TIMEOUT_MS = 90_000;

/**
 * Spawns `node [nodeArgs] script [args]` (`node`: this process's Node, or the command `opts.node`
 * names, such as another release through another glibc's loader) and waits for a JSON log line
 * `{"msg":"listening","port":N}` on stdout.
 */
export async function spawnListening(
  label: string,
  script: string,
  env: Record<string, string>,
  opts: { node?: readonly string[]; nodeArgs?: string[]; args?: string[]; startTimeoutMs?: number; cwd?: string } = {},
): Promise<ListeningProcess> {
  const [node, ...loader] = opts.node ?? [process.execPath];
  // The preload is this checkout's, also for a server of another build (--compare-ref) run from its own.
  const preload = pathToFileURL(join(REPO_ROOT, 'bench/lib/gcPreload.mjs')).href;
  // tsx only for a TypeScript script (a helper, a profiled server): a server bundle runs as in
  // production, without a module loader's thread and its hooks (about a second of CPU per start).
  const tsx = script.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const child = spawn(node!, [...loader, ...tsx, '--expose-gc', '--import', preload, ...(opts.nodeArgs ?? []), script, ...(opts.args ?? [])], {
    cwd: opts.cwd ?? REPO_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  track(child);
  let output = '';
  let pending = '';
  const listening = await new Promise<Record<string, unknown> & { port: number }>((res, rej) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      rej(new Error(`${label} did not report "listening" in time; output:\n${output}`));
    }, opts.startTimeoutMs ?? START_TIMEOUT_MS);
    child.stdout!.setEncoding('utf8');
    child.stderr!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      // Keep the log bounded: a long run must not grow the bench's memory.
      if (output.length < 200_000) output += chunk;
      pending += chunk;
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (!line.includes('"listening"')) continue;
        try {
          const rec = JSON.parse(line) as Record<string, unknown>;
          if (rec.msg === 'listening' && typeof rec.port === 'number') {
            clearTimeout(timer);
            res(rec as Record<string, unknown> & { port: number });
          }
        } catch {
          /* not a JSON line */
        }
      }
      if (pending.length > 100_000) pending = '';
    });
    child.stderr!.on('data', (chunk: string) => {
      if (output.length < 200_000) output += chunk;
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      rej(new Error(`${label} exited before listening (code ${code}, signal ${signal}); output:\n${output}`));
    });
  });
  const { port } = listening;
  return { label, pid: child.pid!, child, port, url: `http://127.0.0.1:${port}`, listening, logs: () => output, stop: stopper(child) };
}

export interface SettledMemory {
  /** Resident set size, bytes. */
  rss: number;
  /** V8 heap in use after a full GC (the process's live JavaScript objects), bytes. */
  heapUsed: number;
  /** Memory of C++ objects bound to JavaScript and of ArrayBuffers, bytes. */
  external: number;
  /**
   * RSS less the V8 heap's committed-but-free space (heapTotal − heapUsed): what the process
   * holds for live data and native state. Plain RSS swings by tens of MB as V8 grows or gives
   * back heap pages; this does not.
   */
  retained: number;
}

/** Runs full GCs in a process the bench started (see gcPreload.mjs), then reads its memory. */
export async function settledMemory(pid: number): Promise<SettledMemory | undefined> {
  const file = join(tmpdir(), `bench-mem-${pid}.json`);
  const since = Date.now();
  for (let i = 0; i < 2; i++) {
    try {
      process.kill(pid, 'SIGUSR2');
    } catch {
      return undefined;
    }
    await sleep(300);
  }
  const rss = rssBytes(pid);
  if (rss === undefined) return undefined;
  try {
    const m = JSON.parse(readFileSync(file, 'utf8')) as { at: number; heapUsed: number; heapTotal: number; external: number };
    if (m.at >= since) return { rss, heapUsed: m.heapUsed, external: m.external, retained: rss - (m.heapTotal - m.heapUsed) };
  } catch {
    /* no reading */
  }
  return { rss, heapUsed: NaN, external: NaN, retained: rss };
}

/** RSS after full GCs (see settledMemory). */
export async function settledRss(pid: number): Promise<number | undefined> {
  return (await settledMemory(pid))?.rss;
}

/** The environment with every variable the server's config reads removed (only what we set applies). */
function cleanEnv(): Record<string, string> {
  const keys = new Set(Object.keys(configSchema.shape));
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !keys.has(k)) out[k] = v;
  return out;
}

export interface ServerOptions {
  label: string;
  /** REDIS_URL, or `{ cluster }` for REDIS_CLUSTER_NODES. */
  redisUrl: string | { cluster: string };
  secret: string;
  /** Extra configuration (ROLES, REDIS_PREFIX, RING_TIMEOUT_MS, push settings, …). */
  env?: Record<string, string>;
  /** Write a V8 CPU profile (.cpuprofile) into this directory when the process exits. */
  cpuProfDir?: string;
  /** The command that runs Node.js (default: this process's own). */
  node?: readonly string[];
  /** The checkout whose src/main.ts runs (default: this one; --compare-ref: the other build's). */
  root?: string;
}

/** Starts the real server (src/main.ts) on a free port; learns the port from its `listening` line. */
export function startServer(o: ServerOptions): Promise<ListeningProcess> {
  const env = {
    ...cleanEnv(),
    HOST: '127.0.0.1',
    PORT: '0',
    // Several server processes run on this host: each its own metrics port.
    METRICS_PORT: '0',
    ...(typeof o.redisUrl === 'string' ? { REDIS_URL: o.redisUrl } : { REDIS_CLUSTER_NODES: o.redisUrl.cluster }),
    AUTH_JWT_SECRET: o.secret,
    // As production logs: the start line, and the worker's one line per call change.
    LOG_LEVEL: 'info',
    ...o.env,
  };
  // One directory per process: its main thread and the loader's thread each write a profile.
  const nodeArgs = o.cpuProfDir ? ['--cpu-prof', '--cpu-prof-dir', join(o.cpuProfDir, `${o.label}.${Date.now()}`)] : [];
  // A profiled server runs from its sources (through tsx), so that its samples name their files (bench/lib/profile.ts).
  const script = o.cpuProfDir ? 'src/main.ts' : serverOf(o.root ?? REPO_ROOT);
  return spawnListening(o.label, script, env, { nodeArgs, ...(o.node ? { node: o.node } : {}), ...(o.root ? { cwd: o.root } : {}) });
}

/** Each checkout's server, compiled once per bench run (scripts/serverBundle.ts). */
const bundles = new Map<string, string>();
function serverOf(root: string): string {
  let bundle = bundles.get(root);
  if (!bundle) bundles.set(root, (bundle = buildServerBundle(root)));
  return bundle;
}

/** Starts a helper script of the bench (Socket.IO server, raw uWS server) the same way. */
export function startHelper(label: string, script: string, env: Record<string, string>): Promise<ListeningProcess> {
  return spawnListening(label, script, { ...cleanEnv(), ...env });
}
