import { spawn, type ChildProcess } from 'node:child_process';
import { configSchema } from '../../src/config/config.js';
import { REPO_ROOT, serverBundle } from './serverBuild.js';
import { TEST_JWT_SECRET } from './tokens.js';
import { terminate } from './processes.js';

/**
 * Runs the REAL server as a child process: src/main.ts, compiled once per test run
 * (./serverBuild.ts), exactly as it runs in production apart from how its TypeScript is compiled.
 * The port comes from its `listening` log line.
 */

export interface TestServer {
  url: string;
  port: number;
  /** The metrics listener (METRICS_PORT=0 picks a free port): `${metricsUrl}/metrics`. */
  metricsUrl: string;
  /** SIGTERM, then SIGKILL after 5 s; resolves once the process has exited. */
  stop(): Promise<void>;
  /** Everything the process wrote so far (stdout and stderr, interleaved). */
  logs(): string;
  /** The process (e.g. to check it is still alive). */
  child: ChildProcess;
}

export { REPO_ROOT };

/**
 * Production answers 503 after 500 ms without Redis (REDIS_COMMAND_TIMEOUT_MS); on a loaded test
 * machine (parallel files, clusters, browsers) a healthy Redis can take that long, so the servers
 * the tests start, and the tests' own connections made with src/redis/connection.ts, wait longer
 * unless they test the bound (redis-stalled.test.ts sets the default back).
 */
export const TEST_REDIS_COMMAND_TIMEOUT_MS = 5000;
// A start takes about a second of CPU; on a starved machine (three test files, a browser and the
// bench smoke test at once) it has taken over 30 s of wall time.
const START_TIMEOUT_MS = 60_000;
const KILL_AFTER_MS = 5_000;

/** Servers still running, killed when the test process exits even if a test forgot stop(). */
const liveChildren = new Set<ChildProcess>();
let exitHookInstalled = false;
/**
 * Kills the servers a test file left running, and says how many: a worker runs its files in one
 * process (vitest.config.ts `isolate: false`), so they would outlive the file
 * (test/support/fileEnd.ts calls this after each file).
 */
export function killLeftoverServers(): number {
  const n = liveChildren.size;
  for (const child of liveChildren) child.kill('SIGKILL');
  liveChildren.clear();
  return n;
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => void killLeftoverServers());
}

/**
 * Starts a server with PORT=0, HOST=127.0.0.1, LOG_LEVEL=info, the test JWT secret and `env`
 * (which must carry REDIS_URL or REDIS_CLUSTER_NODES). Configuration variables inherited from the outer environment are
 * dropped so that only what a test sets applies. The abuse limits are off unless a test sets
 * them: every test client shares 127.0.0.1, and suites create many calls and bad tokens on purpose
 * (test/integration/abuse-limits.test.ts covers the limits).
 */
export interface StartOptions {
  /** How to run Node.js (default: this process's own); e.g. another Node version (test/support/otherNode.ts). */
  node?: string[];
  /** Command-line arguments for src/main.ts (e.g. `--dev`). */
  args?: readonly string[];
}

export async function startServer(env: Record<string, string>, opts: StartOptions = {}): Promise<TestServer> {
  if (!env.REDIS_URL && !env.REDIS_CLUSTER_NODES) throw new Error('startServer: REDIS_URL or REDIS_CLUSTER_NODES is required');
  const childEnv: Record<string, string> = {};
  const configKeys = new Set(Object.keys(configSchema.shape));
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !configKeys.has(k)) childEnv[k] = v;
  }
  Object.assign(childEnv, {
    PORT: '0',
    HOST: '127.0.0.1',
    AUTH_JWT_SECRET: TEST_JWT_SECRET,
    LOG_LEVEL: 'info',
    METRICS_PORT: '0',
    REDIS_COMMAND_TIMEOUT_MS: String(TEST_REDIS_COMMAND_TIMEOUT_MS),
    // Tests open hundreds of sockets at once; test/e2e/admission.test.ts sets its own.
    WS_ADMISSIONS_PER_S: '0',
    RATE_CALL_CREATES_PER_MIN: '0',
    RATE_INVITES_PER_CALLEE_PER_MIN: '0',
    RATE_RENAMES_PER_MIN: '0',
    RATE_PUSH_TOKEN_WRITES_PER_HOUR: '0',
    RATE_WS_MESSAGES_PER_10S: '0',
    RATE_CALL_MESSAGES_PER_10S: '0',
    RATE_AUTH_FAILURES_PER_MIN: '0',
    ...env,
  });

  const [node, ...nodeArgs] = opts.node ?? [process.execPath];
  const child = spawn(node!, [...nodeArgs, serverBundle(), ...(opts.args ?? [])], {
    cwd: REPO_ROOT,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  liveChildren.add(child);
  installExitHook();
  child.once('exit', () => liveChildren.delete(child));

  let output = '';
  let pending = '';

  const { port, metricsPort } = await new Promise<{ port: number; metricsPort: number }>((res, rej) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      rej(new Error(`server did not report "listening" within ${START_TIMEOUT_MS} ms; output:\n${output}`));
    }, START_TIMEOUT_MS);
    child.stdout!.setEncoding('utf8');
    child.stderr!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      output += chunk;
      pending += chunk;
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        try {
          const rec = JSON.parse(line) as { msg?: unknown; port?: unknown; metricsPort?: unknown };
          if (rec.msg === 'listening' && typeof rec.port === 'number' && typeof rec.metricsPort === 'number') {
            clearTimeout(timer);
            res({ port: rec.port, metricsPort: rec.metricsPort });
          }
        } catch {
          /* not a JSON log line */
        }
      }
    });
    child.stderr!.on('data', (chunk: string) => {
      output += chunk;
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      rej(new Error(`server exited before listening (code ${code}, signal ${signal}); output:\n${output}`));
    });
  });

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    metricsUrl: `http://127.0.0.1:${metricsPort}`,
    child,
    logs: () => output,
    async stop() {
      await terminate(child, KILL_AFTER_MS);
    },
  };
}
