import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, randomInt } from 'node:crypto';
import { freePort } from './redis-server.js';
import { waitUntil } from './wait.js';
import { terminate } from './processes.js';
import { JanusSfu } from '../../src/media/janus.js';
import type { SfuObserver } from '../../src/media/sfu.js';

/**
 * A real Janus (apt `janus`, 1.1.x) for tests, configured as docs/operations.md "SFU media"
 * asks of a deployment: the VideoRoom plugin with an `admin_key`, the HTTP transport (the
 * backend's API) and the WebSocket transport (the clients') on free loopback ports only, an
 * `api_secret`, and signed tokens (`token_auth` with `token_auth_secret`). Every other plugin,
 * transport, logger and event handler is disabled. Ready once its HTTP API answers `info`.
 * Stopped by its pid, SIGKILL after a grace period; `kill()` is the fault tests' crash.
 *
 * Any other exit is Janus crashing: it is written to stderr at once, and `stop()` then fails the
 * file with the exit, a backtrace of every thread (gdb on the core the kernel wrote into Janus's
 * folder, where `kernel.core_pattern` is a plain file name) and Janus's last output.
 * JANUS_BIN and JANUS_LIB run another build (one with AddressSanitizer, say: docs/development.md
 * "When Janus crashes").
 */

export interface Janus {
  /** The backend's API URL (JANUS_URLS). */
  apiUrl: string;
  /** The clients' WebSocket URL (JANUS_CLIENT_URLS). */
  wsUrl: string;
  apiSecret: string;
  tokenSecret: string;
  adminKey: string;
  pid: number;
  logs(): string;
  /** SIGKILL, no cleanup: a crash. `start()` brings it back on the same ports and configuration. */
  kill(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';
const JANUS_BIN = process.env.JANUS_BIN ?? 'janus';
const START_TIMEOUT_MS = 20_000;
/** JANUS_LIB, else Debian's Janus modules: /usr/lib/<multiarch triplet>/janus (x86_64-linux-gnu, aarch64-linux-gnu, ...). */
function janusLib(): string {
  if (process.env.JANUS_LIB) return process.env.JANUS_LIB;
  const triplet = readdirSync('/usr/lib').find((d) => existsSync(join('/usr/lib', d, 'janus', 'plugins', 'libjanus_videoroom.so')));
  if (!triplet) throw new Error('janus: no /usr/lib/<arch>/janus/plugins/libjanus_videoroom.so (apt-get install janus)');
  return join('/usr/lib', triplet, 'janus');
}

/** Every `.so` of a Janus module folder except the ones kept (the `disable` lists of janus.jcfg). */
function allBut(lib: string, folder: string, keep: readonly string[]): string {
  return readdirSync(join(lib, folder))
    .filter((f) => f.endsWith('.so') && !keep.includes(f))
    .join(',');
}

function writeConfig(dir: string, j: { httpPort: number; wsPort: number; apiSecret: string; tokenSecret: string; adminKey: string; adminSecret: string }): void {
  // Media on the host's address (libnice offers no loopback candidates), in a window of RTP
  // ports above both coturn's relay windows (test/support/coturn.ts: 20000-59999)
  // and Linux's ephemeral range (32768-60999), where free ports for port 0 come from.
  const rtpMin = 61_000 + randomInt(0, 22) * 200;
  const lib = janusLib();
  writeFileSync(
    join(dir, 'janus.jcfg'),
    `general: {
  configs_folder = "${dir}"
  plugins_folder = "${lib}/plugins"
  transports_folder = "${lib}/transports"
  events_folder = "${lib}/events"
  loggers_folder = "${lib}/loggers"
  log_to_stdout = true
  debug_level = 4
  debug_colors = false
  server_name = "calling-backend-test"
  session_timeout = 60
  api_secret = "${j.apiSecret}"
  admin_secret = "${j.adminSecret}"
  token_auth = true
  token_auth_secret = "${j.tokenSecret}"
  protected_folders = ["/bin", "/boot", "/dev", "/etc", "/initrd", "/lib", "/lib32", "/lib64", "/proc", "/sbin", "/sys", "/usr", "/var"]
}
certificates: {}
media: {
  rtp_port_range = "${rtpMin}-${rtpMin + 199}"
}
nat: {
  nice_debug = false
}
plugins: { disable = "${allBut(lib, 'plugins', ['libjanus_videoroom.so'])}" }
transports: { disable = "${allBut(lib, 'transports', ['libjanus_http.so', 'libjanus_websockets.so'])}" }
loggers: { disable = "${allBut(lib, 'loggers', [])}" }
events: {
  broadcast = false
  disable = "${allBut(lib, 'events', [])}"
}
`,
  );
  writeFileSync(
    join(dir, 'janus.transport.http.jcfg'),
    `general: {
  json = "plain"
  base_path = "/janus"
  http = true
  port = ${j.httpPort}
  ip = "${HOST}"
  https = false
}
admin: { admin_http = false }
cors: {}
`,
  );
  writeFileSync(
    join(dir, 'janus.transport.websockets.jcfg'),
    `general: {
  json = "plain"
  ws = true
  ws_port = ${j.wsPort}
  ws_ip = "${HOST}"
  wss = false
}
admin: { admin_ws = false }
cors: {}
`,
  );
  writeFileSync(
    join(dir, 'janus.plugin.videoroom.jcfg'),
    `general: {
  admin_key = "${j.adminKey}"
  lock_rtp_forward = true
}
`,
  );
}

/** Starts a Janus with fresh secrets, or with `shared` ones (several instances of one deployment). */
/** A server's settings for this Janus (docs/operations.md "SFU media"): its API, its clients' WebSocket, and its secrets. */
export function janusEnv(janus: Janus): Record<string, string> {
  return {
    JANUS_URLS: janus.apiUrl,
    JANUS_CLIENT_URLS: janus.wsUrl,
    JANUS_API_SECRET: janus.apiSecret,
    JANUS_TOKEN_SECRET: janus.tokenSecret,
    JANUS_ADMIN_KEY: janus.adminKey,
  };
}

export async function startJanus(shared: Partial<Pick<Janus, 'apiSecret' | 'tokenSecret' | 'adminKey'>> = {}): Promise<Janus> {
  const dir = mkdtempSync(join(tmpdir(), 'janus-'));
  const secrets = {
    apiSecret: randomBytes(12).toString('hex'),
    tokenSecret: randomBytes(12).toString('hex'),
    adminKey: randomBytes(12).toString('hex'),
    adminSecret: randomBytes(12).toString('hex'),
    ...shared,
  };
  const httpPort = await freePort();
  const wsPort = await freePort();
  writeConfig(dir, { httpPort, wsPort, ...secrets });
  const apiUrl = `http://${HOST}:${httpPort}/janus`;

  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let output = '';
  /** Set by kill/stop. */
  let expectedExit = false;
  /** A crash's report (see above), once gdb has read its core. */
  let crash: Promise<string> | undefined;
  const killOnExit = () => {
    expectedExit = true;
    child?.kill('SIGKILL');
  };
  const running = () => child !== undefined && child.exitCode === null && child.signalCode === null;

  const start = async () => {
    expectedExit = false;
    // prlimit: a crash leaves a core (in `dir`, Janus's working folder) for the report.
    const c = spawn('prlimit', ['--core=unlimited', '--', JANUS_BIN, '-C', join(dir, 'janus.jcfg'), '-F', dir], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    child = c;
    c.stdout!.setEncoding('utf8').on('data', (s: string) => (output = (output + s).slice(-200_000)));
    c.stderr!.setEncoding('utf8').on('data', (s: string) => (output = (output + s).slice(-200_000)));
    exited = new Promise<void>((r) => c.once('exit', () => r()));
    c.once('exit', (code, signal) => {
      // Stopped or killed by the harness: SIGTERM's clean exit, or SIGKILL. Anything else is a crash.
      if (expectedExit && (signal === null || signal === 'SIGKILL' || signal === 'SIGTERM')) return;
      crash = crashReport(dir, `janus ${c.pid} exited unexpectedly (code ${code}, signal ${signal})`, output.slice(-6000));
      void crash.then((report) => process.stderr.write(`${report}\n`));
    });
    process.once('exit', killOnExit);
    const answers = async () => {
      if (!running()) throw new Error(`janus exited:\n${output.slice(-4000)}`);
      const res = await fetch(`${apiUrl}/info`).catch(() => undefined);
      if (!res?.ok) return false;
      const info = (await res.json()) as { plugins?: Record<string, unknown> };
      return 'janus.plugin.videoroom' in (info.plugins ?? {});
    };
    await waitUntil(`janus to answer on ${apiUrl}`, answers, START_TIMEOUT_MS, { intervalMs: 50, detail: () => output.slice(-4000) }).catch((err: unknown) => {
      expectedExit = true;
      c.kill('SIGKILL');
      throw err;
    });
  };
  const kill = async () => {
    process.removeListener('exit', killOnExit);
    expectedExit = true;
    if (running()) {
      child!.kill('SIGKILL');
      await exited;
    }
  };

  await start().catch((err: unknown) => {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  });
  return {
    apiUrl,
    wsUrl: `ws://${HOST}:${wsPort}`,
    ...secrets,
    get pid() {
      return child?.pid ?? -1;
    },
    logs: () => output,
    kill,
    start,
    async stop() {
      process.removeListener('exit', killOnExit);
      expectedExit = true;
      if (child) await terminate(child, 3000);
      const report = await crash;
      rmSync(dir, { recursive: true, force: true });
      if (report) throw new Error(report);
    },
  };
}

/** What a crash left: how Janus exited, gdb's backtrace of each thread when there is a core in `dir`, and its last output. */
async function crashReport(dir: string, exit: string, lastOutput: string): Promise<string> {
  const core = readdirSync(dir).find((f) => f.startsWith('core'));
  let backtrace = 'no core file (kernel.core_pattern may send cores elsewhere)';
  if (core) {
    const bin = JANUS_BIN.includes('/') ? JANUS_BIN : (process.env.PATH ?? '').split(':').map((d) => join(d, JANUS_BIN)).find((f) => existsSync(f));
    backtrace = await promisify(execFile)('gdb', ['-batch', '-ex', 'thread apply all bt 30', bin ?? JANUS_BIN, join(dir, core)], { timeout: 60_000, maxBuffer: 16 << 20 })
      .then(({ stdout }) => stdout.split('\n').filter((l) => /^(Thread|#)/.test(l)).join('\n').slice(0, 20_000))
      .catch((err: Error) => `gdb could not read ${core}: ${err.message}`);
  }
  return `${exit}\n--- backtrace ---\n${backtrace}\n--- its last output ---\n${lastOutput}`;
}

/** A JanusSfu like the server's on `janus`, for the steps a relay would take; counts what it observes by op. */
export function countingJanusSfu(janus: Janus, counts: Record<string, number>): JanusSfu {
  const count = (k: string) => (counts[k] = (counts[k] ?? 0) + 1);
  const observe: SfuObserver = { room: count, join: () => count('join'), kick: () => count('kick'), error: (op) => count(`error:${op}`) };
  return new JanusSfu(
    { instances: [{ url: janus.apiUrl, clientUrl: janus.wsUrl }], apiSecret: janus.apiSecret, tokenSecret: janus.tokenSecret, adminKey: janus.adminKey, maxPublishers: 16, timeoutMs: 1000 },
    observe,
  );
}
