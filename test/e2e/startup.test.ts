import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT, startServer } from '../support/server.js';
import { startRedis } from '../support/redis-server.js';
import { waitUntil, within } from '../support/wait.js';
import { configSchema } from '../../src/config/config.js';
import { devBanner } from '../../src/demo/devBanner.js';

/**
 * Issue 2 items 1-3: the quick start (`--dev` with an embedded Redis and printed tokens), the
 * configuration check that names the bad variable, and the refusal to run on uWebSockets.js's
 * slow `ws` fallback.
 */

interface Run {
  code: number | null;
  output: string;
}

/** This process's environment without any config variable, plus `env`. */
function configEnv(env: Record<string, string>): Record<string, string> {
  const childEnv: Record<string, string> = {};
  const configKeys = new Set(Object.keys(configSchema.shape));
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !configKeys.has(k)) childEnv[k] = v;
  return Object.assign(childEnv, env);
}

/** Runs `node --import tsx src/main.ts [args]` with only the given config variables. */
function runMain(env: Record<string, string>, args: string[] = [], untilOutput?: RegExp, timeoutMs = 30_000) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args], { cwd: REPO_ROOT, env: configEnv(env) });
  let output = '';
  const onData = (d: Buffer) => {
    output += d.toString();
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise<Run>((resolve) => child.on('exit', (code) => resolve({ code, output })));
  const matched = untilOutput
    ? new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ${untilOutput} in output:\n${output}`)), timeoutMs);
        const check = () => {
          if (untilOutput.test(output)) {
            clearTimeout(timer);
            resolve(output);
          }
        };
        child.stdout.on('data', check);
        child.stderr.on('data', check);
      })
    : undefined;
  return { child, exited, matched, output: () => output };
}

/** A process by its id and start time (field 22 of /proc/<pid>/stat), so a reused id is not mistaken for it. */
interface Proc {
  pid: number;
  start: string;
}

/** The fields of /proc/<pid>/stat after `(comm)`, which may itself hold spaces: [state, ppid, ...]. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** Every process below `pid` (children, theirs, ...). */
function descendants(pid: number): Proc[] {
  const all = readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .flatMap((e) => {
      const f = statFields(Number(e));
      return f ? [{ pid: Number(e), ppid: Number(f[1]), start: f[19]! }] : [];
    });
  const below = (p: number): Proc[] => all.filter((c) => c.ppid === p).flatMap((c) => [{ pid: c.pid, start: c.start }, ...below(c.pid)]);
  return below(pid);
}

/** Whether the process still runs (a zombie has exited; a new process with its id is another). */
function running(p: Proc): boolean {
  const f = statFields(p.pid);
  return f !== undefined && f[0] !== 'Z' && f[19] === p.start;
}

/** Pastes the token line and the example of a dev banner into `sh` twice, as one would in a terminal; the statuses and callIds it printed. */
async function pasteTwice(banner: string): Promise<{ statuses: string[]; callIds: string[]; output: string }> {
  const text = banner.replace(/\r/g, '');
  const tokenLine = /^ {2}ALICE=\S+$/m.exec(text)![0];
  const example = /^ {2}ID=[^\n]*\n(?:.+\n)+/m.exec(text)![0];
  const { stdout } = await promisify(execFile)('sh', ['-c', `${tokenLine}\n${example}${example}`], { cwd: REPO_ROOT });
  return {
    statuses: [...stdout.matchAll(/^HTTP (\d+)$/gm)].map((m) => m[1]!),
    callIds: [...stdout.matchAll(/"callId":"([^"]+)"/g)].map((m) => m[1]!),
    output: stdout,
  };
}

describe('start-up', () => {
  it('a bad configuration value stops the process with exit code 2 and names the variable', async () => {
    const { code, output } = await runMain({ PORT: 'eighty', RING_TIMEOUT_MS: '90000', AUTH_JWT_SECRET: 'x'.repeat(40), REDIS_URL: 'redis://127.0.0.1:1' }).exited;
    expect(code).toBe(2);
    expect(output).toMatch(/invalid configuration/);
    expect(output).toMatch(/PORT: /);
    expect(output).toMatch(/RING_TIMEOUT_MS: Too big/);
  });

  it('without a verification key and without --dev it refuses to start, naming AUTH_JWT_SECRET', async () => {
    const { code, output } = await runMain({ REDIS_URL: 'redis://127.0.0.1:1' }).exited;
    expect(code).toBe(2);
    expect(output).toMatch(/AUTH_JWT_SECRET: set one of AUTH_JWT_SECRET, AUTH_JWT_PUBLIC_KEY or AUTH_JWKS_URL/);
  });

  it('with NODE_ENV=production, no Redis configured is a start error (no embedded Redis), and so is no verification key, even with --dev', async () => {
    const noRedis = await runMain({ NODE_ENV: 'production', AUTH_JWT_SECRET: 'x'.repeat(40) }).exited;
    expect(noRedis.code).toBe(2);
    expect(noRedis.output).toMatch(/REDIS_URL: with NODE_ENV=production set REDIS_URL or REDIS_CLUSTER_NODES/);
    expect(noRedis.output).not.toMatch(/embedded redis-server/);
    const noKey = await runMain({ NODE_ENV: 'production', REDIS_URL: 'redis://127.0.0.1:1' }, ['--dev']).exited;
    expect(noKey.code).toBe(2);
    expect(noKey.output).toMatch(/AUTH_JWT_SECRET: set one of AUTH_JWT_SECRET, AUTH_JWT_PUBLIC_KEY or AUTH_JWKS_URL/);
  });

  it('refuses to run on the uWebSockets.js ws fallback unless allowed', async () => {
    // Neither build's binary loads: the newer one as on glibc < 2.38 (a preload makes it fail on any
    // machine), the other as on a Node.js it has no binary for (UWS_USE_FALLBACK, its own switch).
    const noBtc = fileURLToPath(new URL('../support/no-btc-uws.cjs', import.meta.url));
    const { code, output } = await runMain({ UWS_USE_FALLBACK: '1', NODE_OPTIONS: `--require ${noBtc}`, AUTH_JWT_SECRET: 'x'.repeat(40), REDIS_URL: 'redis://127.0.0.1:1' }).exited;
    expect(code).toBe(1);
    expect(output).toMatch(/no uWebSockets\.js native binary loads on Node\.js v/);
    // Both builds were tried, each with its reason.
    expect(output).toMatch(/@btc-vision\/uwebsockets\.js: /);
    expect(output).toMatch(/uWebSockets\.js: no native binary for this Node\.js \(fell back to its ws shim\)/);
    expect(output).toMatch(/ALLOW_UWS_FALLBACK=true/);
  });

  it('quick start: --dev without REDIS_URL starts an embedded redis-server, prints working tokens, and stops it on SIGTERM', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'quickstart-'));
    try {
      // METRICS_PORT 0: the default 9464 may be taken by another test's server running meanwhile.
      const run = runMain({ PORT: '0', HOST: '127.0.0.1', METRICS_PORT: '0', EMBEDDED_REDIS_DIR: join(dir, 'redis') }, ['--dev'], /BOB=\S+/);
      const out = await run.matched!;
      const port = Number(/"port":(\d+)/.exec(out)?.[1]);
      const redisPort = Number(/"redis":"redis:\/\/127\.0\.0\.1:(\d+)"/.exec(out)?.[1]);
      const alice = /ALICE=(\S+)/.exec(out)?.[1];
      expect(port).toBeGreaterThan(0);
      expect(redisPort).toBeGreaterThan(0);
      expect(redisPort).not.toBe(6379);
      const res = await fetch(`http://127.0.0.1:${port}/v1/calls`, {
        method: 'POST',
        headers: { authorization: `Bearer ${alice}`, 'content-type': 'application/json' },
        body: JSON.stringify({ callId: crypto.randomUUID(), calleeUserId: 'bob', operationId: crypto.randomUUID() }),
      });
      expect(res.status).toBe(201);
      expect(((await res.json()) as { caller: unknown }).caller).toEqual({ userId: 'alice', displayName: 'Alice', handle: 'app:alice' });
      // Append-only persistence in the data directory.
      expect(existsSync(join(dir, 'redis', 'appendonlydir'))).toBe(true);
      run.child.kill('SIGTERM');
      expect((await run.exited).code).toBe(0);
      // The embedded Redis is gone with it.
      const probe = await fetch(`http://127.0.0.1:${redisPort}`).then(
        () => 'open',
        (err: Error & { cause?: { code?: string } }) => err.cause?.code ?? 'error',
      );
      expect(probe).toBe('ECONNREFUSED');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("warns at start when Redis's hz would make ring sweeps and push retries start up to 100 ms late, and not with hz 100", async () => {
    for (const hz of [10, 100]) {
      const redis = await startRedis({ hz });
      const server = await startServer({ REDIS_URL: redis.url, ROLES: 'worker' });
      try {
        const warned = /Redis runs with hz 10: ring sweeps and push retries may start up to 100 ms late; run Redis with hz 100/.test(server.logs());
        expect(warned).toBe(hz === 10);
      } finally {
        await server.stop();
        await redis.stop();
      }
    }
  });

  it('npm run dev in a terminal: the printed example makes a new call at every paste, with or without curl, and Ctrl-C stops the server and then its Redis quietly, with exit code 0', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'quickstart-'));
    // script (util-linux) runs the command on a pseudo-terminal, in that terminal's foreground
    // process group, and types what is written to its input: a Ctrl-C goes to the whole group.
    // That is why package.json's dev script is `exec node --import tsx ...`: the sh of an npm
    // script dies of the SIGINT (npm then exits 130 while the server still shuts down), and tsx's
    // CLI kills a child that does not report the signal to it within 30 ms.
    const env = configEnv({ PORT: '0', HOST: '127.0.0.1', METRICS_PORT: '0', EMBEDDED_REDIS_DIR: join(dir, 'redis') });
    const term = spawn('script', ['-qfec', 'npm run dev', '/dev/null'], { cwd: REPO_ROOT, env });
    let output = '';
    term.stdout.on('data', (d: Buffer) => (output += d.toString()));
    term.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((res) => term.on('exit', (code) => res(code)));
    try {
      await waitUntil('the printed example', () => /"operationId":"op-'\$ID'"\}'\r?\n/.test(output), 60_000);
      const port = Number(/"port":(\d+)/.exec(output)?.[1]);
      const redisPort = Number(/"redis":"redis:\/\/127\.0\.0\.1:(\d+)"/.exec(output)?.[1]);
      const redisPid = Number(/"redisPid":(\d+)/.exec(output)?.[1]);

      // Pasted twice: two new calls (201), not a 409 for a reused operationId.
      const printed = await pasteTwice(output);
      expect(printed.statuses, printed.output).toEqual(['201', '201']);
      expect(new Set(printed.callIds).size).toBe(2);
      // The form printed on a machine without curl works the same.
      const alice = /ALICE=(\S+)/.exec(output.replace(/\r/g, ''))![1]!;
      const withoutCurl = await pasteTwice(devBanner({ baseUrl: `http://127.0.0.1:${port}`, alice, bob: '', curl: false, demo: false }));
      expect(withoutCurl.statuses, withoutCurl.output).toEqual(['201', '201']);
      expect(new Set([...printed.callIds, ...withoutCurl.callIds]).size).toBe(4);

      const processes = descendants(term.pid!);
      expect(processes.map((p) => p.pid)).toContain(redisPid);
      const before = output.length;
      term.stdin.write('\x03');
      expect(await within(30_000, 'the exit after Ctrl-C', exited)).toBe(0);
      // Nothing is left running: npm, the server, its Redis and the Redis guard.
      await waitUntil('every process of the run gone', () => processes.every((p) => !running(p)));
      const probe = await fetch(`http://127.0.0.1:${redisPort}`).then(
        () => 'open',
        (err: Error & { cause?: { code?: string } }) => err.cause?.code ?? 'error',
      );
      expect(probe).toBe('ECONNREFUSED');
      // Quiet: one shutting-down line, no warning or error (a Redis gone first made dozens).
      const after = output.slice(before).replace(/\r/g, '');
      expect(after).toMatch(/"msg":"shutting down"/);
      expect(after.split('\n').filter((l) => /error|"level":"(warn|error|fatal)"|ECONNREFUSED/i.test(l))).toEqual([]);
    } finally {
      if (term.exitCode === null) term.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('the embedded Redis does not outlive a server killed with SIGKILL', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'quickstart-'));
    try {
      const run = runMain({ PORT: '0', HOST: '127.0.0.1', METRICS_PORT: '0', EMBEDDED_REDIS_DIR: join(dir, 'redis') }, ['--dev'], /BOB=\S+/);
      const out = await run.matched!;
      const redisPid = Number(/"redisPid":(\d+)/.exec(out)?.[1]);
      const redis = descendants(run.child.pid!).find((p) => p.pid === redisPid)!;
      expect(redis && running(redis)).toBe(true);
      run.child.kill('SIGKILL');
      await run.exited;
      await waitUntil('the embedded redis-server gone', () => !running(redis), 10_000);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
