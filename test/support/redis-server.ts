import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitUntil } from './wait.js';
import { isAlive, terminate } from './processes.js';

/**
 * Throw-away `redis-server` processes for tests: each on a free loopback port with its own
 * temporary directory, never persisted, and stopped when the test process ends even if a test
 * forgot to call `stop()`.
 *
 * Ending with the test process takes two mechanisms: an 'exit' hook covers a normal exit, but
 * vitest ends its fork workers with SIGTERM, which skips 'exit' hooks. So on Linux each server
 * is started through `setpriv --pdeathsig`, and the kernel stops it when its parent dies, however
 * it dies. Directories of dead test processes are swept when the next one starts a server.
 */

export interface StartRedisOptions {
  /** Turn on append-only persistence (inside the temporary directory). Default: off. */
  appendOnly?: boolean;
  /** Redis's `hz` (default here: 100, as docs/operations.md recommends). */
  hz?: number;
  /** More redis-server arguments (e.g. `--enable-debug-command local` for DEBUG DIGEST). */
  extraArgs?: string[];
}

export interface RedisServer {
  /** `redis://127.0.0.1:<port>` */
  url: string;
  port: number;
  /** The server's working directory (removed by `stop()`). */
  dir: string;
  /** The redis-server process id. */
  pid: number;
  /** Stops the server and removes its directory; safe to call twice. */
  stop(): Promise<void>;
}

export interface RedisClusterNode {
  host: string;
  port: number;
}

export interface RedisCluster {
  /** One entry per master, usable as ioredis `new Cluster(nodes)` startup nodes. */
  nodes: RedisClusterNode[];
  /** Every server of the cluster (masters and replicas), by port. */
  servers: RedisServer[];
  /** `REDIS_CLUSTER_NODES` for a server process: every node as host:port. */
  seedList: string;
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';
/** A port found free can be taken by someone else before redis-server binds it: retry then. */
const PORT_ATTEMPTS = 5;
const START_TIMEOUT_MS = 10_000;
const STOP_GRACE_MS = 5_000;
/** How much of a server's own output to keep for error messages. */
const LOG_TAIL_CHARS = 4_000;

export async function startRedis(opts: StartRedisOptions = {}): Promise<RedisServer> {
  const appendOnly = opts.appendOnly === true ? 'yes' : 'no';
  return launch(() => ['--appendonly', appendOnly, ...(opts.hz === undefined ? [] : ['--hz', String(opts.hz)]), ...(opts.extraArgs ?? [])]);
}

/**
 * Kills `server` with SIGKILL (no shutdown, nothing flushed beyond what Redis already wrote) and
 * starts a new redis-server on the same port and directory: with `appendOnly` it loads its AOF,
 * as a production Redis restarted by its supervisor. Stop the returned server, not the old one.
 */
export async function crashAndRestartRedis(server: RedisServer, opts: StartRedisOptions = {}): Promise<RedisServer> {
  process.kill(server.pid, 'SIGKILL');
  await waitUntil(`redis-server ${server.pid} to stop answering after SIGKILL`, () => redisCommand(server.port, ['PING'], 200).then(() => false, () => true), START_TIMEOUT_MS, { intervalMs: 20 });
  const appendOnly = opts.appendOnly === true ? 'yes' : 'no';
  const restarted = spawnServer(server.port, server.dir, [...baseArgs(server.port, server.dir), '--appendonly', appendOnly]);
  await waitForPing(restarted);
  return restarted.handle;
}

export interface StartClusterOptions {
  /**
   * cluster-node-timeout once the cluster is up: how long a node may not answer before its
   * replica takes over. Redis's default (15 s) unless a test kills a primary and waits for the
   * failover: on a loaded machine a short timeout fails a primary over that was only starved of
   * CPU for a moment, and a request in that window rightly answers 503, which a test not about
   * failover takes for a bug. (The cluster is formed with JOIN_NODE_TIMEOUT_MS: nodes ping the
   * ones they have not heard from for half the timeout, so a long one makes joining slow.)
   */
  nodeTimeoutMs?: number;
}

/**
 * A Redis Cluster of `nodes` masters, each with `replicas` replicas, whose 16384 slots are
 * spread by `redis-cli --cluster create`. Resolves once every node reports `cluster_state:ok`
 * (and every replica is attached to its master).
 */
export async function startRedisCluster(nodes = 3, replicas = 0, opts: StartClusterOptions = {}): Promise<RedisCluster> {
  if (nodes < 3) throw new Error('startRedisCluster: Redis Cluster needs at least 3 masters');
  const nodeTimeoutMs = opts.nodeTimeoutMs ?? 15_000;
  const started = await Promise.allSettled(Array.from({ length: nodes * (1 + replicas) }, () => launch(clusterArgs)));
  const servers = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const stopAll = async (): Promise<void> => {
    await Promise.all(servers.map((s) => s.stop()));
  };
  try {
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    await createCluster(servers.map((s) => s.port), replicas);
    await Promise.all(servers.map((s) => waitForClusterOk(s.port)));
    if (replicas > 0) await waitForReplicas(servers[0]!.port, nodes * replicas);
    if (nodeTimeoutMs !== JOIN_NODE_TIMEOUT_MS) {
      await Promise.all(servers.map((s) => redisCommand(s.port, ['CONFIG', 'SET', 'cluster-node-timeout', String(nodeTimeoutMs)])));
    }
  } catch (err) {
    await stopAll();
    throw err;
  }
  // redis-cli makes the first `nodes` servers the masters.
  return {
    nodes: servers.slice(0, nodes).map((s) => ({ host: HOST, port: s.port })),
    servers,
    seedList: servers.map((s) => `${HOST}:${s.port}`).join(','),
    stop: stopAll,
  };
}

/** Waits until CLUSTER NODES lists `count` replicas whose link to their master is up. */
async function waitForReplicas(port: number, count: number): Promise<void> {
  let nodes = '';
  const attached = async () => {
    nodes = await redisCommand(port, ['CLUSTER', 'NODES']).catch((err: unknown) => String(err));
    const replicaPorts = nodes
      .split('\n')
      .filter((l) => /\bslave\b/.test(l) && /\bconnected\b/.test(l))
      .map((l) => Number(/:(\d+)@/.exec(l)?.[1]));
    if (replicaPorts.length < count) return false;
    // And each replica has finished its first sync (else it would refuse to take over).
    const infos = await Promise.all(replicaPorts.map((p) => redisCommand(p, ['INFO', 'replication']).catch(() => '')));
    return infos.every((i) => i.includes('master_link_status:up'));
  };
  await waitUntil('the cluster replicas to attach', attached, START_TIMEOUT_MS * 3, { intervalMs: 100, detail: () => nodes });
}

/**
 * Cluster mode needs a second, free port for the cluster bus. Redis defaults to port + 10000,
 * which can exceed 65535 for ports from the ephemeral range, so pick one explicitly.
 */
/** The cluster-node-timeout a cluster is formed with (StartClusterOptions.nodeTimeoutMs). */
const JOIN_NODE_TIMEOUT_MS = 2_000;

async function clusterArgs(dir: string): Promise<string[]> {
  return [
    '--cluster-enabled', 'yes',
    '--cluster-config-file', join(dir, 'nodes.conf'),
    '--cluster-port', String(await freePort()),
    '--cluster-node-timeout', String(JOIN_NODE_TIMEOUT_MS),
    // A replica takes over however long it was out of touch (no data-age limit).
    '--cluster-replica-validity-factor', '0',
    // A replica's first sync starts at once: Redis 7's default waits 5 s for more replicas to
    // share one diskless transfer, which made every cluster's start 5 s longer.
    '--repl-diskless-sync-delay', '0',
    '--appendonly', 'no',
  ];
}

/** Starts one redis-server with `extraArgs`, retrying on a port lost to a race. */
async function launch(extraArgs: (dir: string) => string[] | Promise<string[]>): Promise<RedisServer> {
  for (let attempt = 1; ; attempt++) {
    const dir = mkdtempSync(join(processRoot(), 'node-'));
    const port = await stablePort();
    const server = spawnServer(port, dir, [...baseArgs(port, dir), ...(await extraArgs(dir))]);
    try {
      await waitForPing(server);
      return server.handle;
    } catch (err) {
      await server.handle.stop();
      if (attempt < PORT_ATTEMPTS && (err instanceof PortTakenError || /Address already in use/i.test(server.logTail()))) continue;
      throw err;
    }
  }
}

function baseArgs(port: number, dir: string): string[] {
  return [
    '--port', String(port),
    '--bind', HOST,
    '--dir', dir,
    '--save', '',
    // As in production (docs/operations.md "Operations"): ring timers wait in blocking reads whose
    // timeouts Redis handles hz times a second.
    '--hz', '100',
    '--daemonize', 'no',
    '--loglevel', 'warning',
    '--logfile', '',
  ];
}

interface SpawnedServer {
  child: ChildProcess;
  handle: RedisServer;
  logTail(): string;
}

function spawnServer(port: number, dir: string, args: string[]): SpawnedServer {
  const { command, argv } = diesWithParent('redis-server', args);
  const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  // Keep draining the pipes (a full pipe would block the server) and keep the tail for errors.
  const keep = (chunk: Buffer): void => {
    log = (log + chunk.toString('utf8')).slice(-LOG_TAIL_CHARS);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  // A failed spawn (no redis-server on PATH) shows in the log tail that waitForPing reports.
  child.on('error', (err) => keep(Buffer.from(`spawn error: ${err.message}\n`)));
  const entry = { child, dir };
  liveServers.add(entry);
  installExitHook();
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    // SIGTERM makes Redis shut down cleanly; with no save points nothing is written.
    stopping ??= terminate(child, STOP_GRACE_MS).finally(() => {
      liveServers.delete(entry);
      rmSync(dir, { recursive: true, force: true });
    });
    return stopping;
  };
  const handle: RedisServer = { url: `redis://${HOST}:${port}`, port, dir, pid: child.pid ?? -1, stop };
  return { child, handle, logTail: () => log };
}

/** Servers still running, killed synchronously when the process exits (the only chance left). */
const liveServers = new Set<{ child: ChildProcess; dir: string }>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const { child } of liveServers) child.kill('SIGKILL');
    if (root !== undefined) rmSync(root, { recursive: true, force: true });
  });
}

let parentDeathSignal: boolean | undefined;

/**
 * `command` under `setpriv --pdeathsig TERM` where available (Linux with util-linux), so it stops
 * when the test process dies however it dies (redis-server, haproxy, dockerd).
 */
export function diesWithParent(command: string, args: string[]): { command: string; argv: string[] } {
  parentDeathSignal ??= spawnSync('setpriv', ['--pdeathsig', 'TERM', 'true'], { stdio: 'ignore' }).status === 0;
  // setpriv execs the command, so the child's pid is the command's.
  if (parentDeathSignal) return { command: 'setpriv', argv: ['--pdeathsig', 'TERM', '--', command, ...args] };
  return { command, argv: args };
}

const ROOT_PREFIX = 'redis-test-';
let root: string | undefined;

/** This process's directory for server directories: `<tmp>/redis-test-<pid>-XXXXXX`. */
function processRoot(): string {
  if (root === undefined) {
    sweepDeadRoots();
    root = mkdtempSync(join(tmpdir(), `${ROOT_PREFIX}${process.pid}-`));
  }
  return root;
}

/** Removes the directories of test processes that died without cleaning up. */
function sweepDeadRoots(): void {
  for (const name of readdirSync(tmpdir())) {
    const pid = Number(new RegExp(`^${ROOT_PREFIX}(\\d+)-`).exec(name)?.[1]);
    if (pid > 0 && !isAlive(pid)) rmSync(join(tmpdir(), name), { recursive: true, force: true });
  }
}

/** A port the kernel just handed out for port 0 and that nobody listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, HOST, () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** The range stablePort draws from: below the kernel's ephemeral ports (32768–60999 by default). */
const STABLE_PORTS = { from: 20_000, count: 7_000 };

/**
 * A free port outside the kernel's ephemeral range, for redis-servers. A test that kills one and
 * starts it again on its port (crashAndRestartRedis) needs the port to stay free in between; an
 * ephemeral one can be taken meanwhile by any process's outgoing connection or another test's
 * freePort() (a CI run saw "Address already in use" there). Launch still retries a port that is
 * lost to a race.
 */
async function stablePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = STABLE_PORTS.from + Math.floor(Math.random() * STABLE_PORTS.count);
    if (await canListen(port)) return port;
  }
  return freePort();
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, HOST, () => srv.close(() => resolve(true)));
  });
}

/** Another process answered on the port a new server was to bind. */
class PortTakenError extends Error {
  constructor(port: number, pid: number) {
    super(`port ${port} is answered by another redis-server (pid ${pid})`);
  }
}

async function waitForPing(server: SpawnedServer): Promise<void> {
  const { child, handle } = server;
  const answers = async () => {
    if (child.pid === undefined) throw new Error('could not spawn redis-server: is it on PATH?');
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`redis-server exited (${child.exitCode ?? child.signalCode}):\n${server.logTail()}`);
    }
    const pid = /process_id:(\d+)/.exec(await redisCommand(handle.port, ['INFO', 'server']).catch(() => ''))?.[1];
    if (pid === undefined) return false;
    // A port found free can be taken by another test's redis-server before this one binds it:
    // that server then answers here while this one fails to bind. Only this process counts.
    if (Number(pid) !== child.pid) throw new PortTakenError(handle.port, Number(pid));
    return true;
  };
  await waitUntil(`redis-server on port ${handle.port} to answer PING`, answers, START_TIMEOUT_MS, { detail: () => server.logTail() });
}

async function waitForClusterOk(port: number): Promise<void> {
  let info = '';
  const ok = async () => (info = await redisCommand(port, ['CLUSTER', 'INFO']).catch((err: unknown) => String(err))).includes('cluster_state:ok');
  await waitUntil(`cluster node ${port} to reach cluster_state:ok`, ok, START_TIMEOUT_MS, { intervalMs: 50, detail: () => info });
}

function createCluster(ports: number[], replicas: number): Promise<void> {
  const args = ['--cluster', 'create', ...ports.map((p) => `${HOST}:${p}`), '--cluster-replicas', String(replicas), '--cluster-yes'];
  return new Promise((resolve, reject) => {
    const cli = spawn('redis-cli', args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: START_TIMEOUT_MS });
    let out = '';
    const keep = (chunk: Buffer): void => {
      out = (out + chunk.toString('utf8')).slice(-LOG_TAIL_CHARS);
    };
    cli.stdout.on('data', keep);
    cli.stderr.on('data', keep);
    cli.once('error', reject);
    cli.once('close', (code) => {
      // redis-cli can exit 0 after printing an error, so check what it says too.
      if (code === 0 && out.includes('[OK] All 16384 slots covered')) resolve();
      else reject(new Error(`redis-cli --cluster create failed (${code}):\n${out}`));
    });
  });
}

/**
 * Sends one command over a fresh connection and returns the first reply line for simple
 * replies (`+PONG`, `-ERR …`) or the payload of a bulk reply. Enough for PING and CLUSTER INFO,
 * and free of a client library's reconnect logic while a server is still starting.
 */
export function redisCommand(port: number, args: string[], timeoutMs = 2_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = new Socket();
    let buffer = Buffer.alloc(0);
    const finish = (err: Error | null, reply = ''): void => {
      socket.destroy();
      if (err) reject(err);
      else resolve(reply);
    };
    socket.setTimeout(timeoutMs, () => finish(new Error('redis command timed out')));
    socket.once('error', (err) => finish(err));
    socket.once('close', () => finish(new Error('connection closed before a reply')));
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      const reply = parseReply(buffer);
      if (reply !== undefined) finish(null, reply);
    });
    socket.connect(port, HOST, () => socket.write(encodeCommand(args)));
  });
}

function encodeCommand(args: string[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
}

/** The reply once complete, undefined while more bytes are needed. */
function parseReply(buffer: Buffer): string | undefined {
  const lineEnd = buffer.indexOf('\r\n');
  if (lineEnd < 0) return undefined;
  const line = buffer.subarray(0, lineEnd).toString('utf8');
  if (!line.startsWith('$')) return line;
  const length = Number(line.slice(1));
  if (length < 0) return '';
  const start = lineEnd + 2;
  if (buffer.length < start + length + 2) return undefined;
  return buffer.subarray(start, start + length).toString('utf8');
}

