import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from './server.js';
import { configSchema } from '../../src/config/config.js';

/** The entry point run as a user runs it, with only the config variables a test gives. */

export interface Run {
  code: number | null;
  output: string;
}

/** This process's environment without any config variable, plus `env`. */
export function configEnv(env: Record<string, string>): Record<string, string> {
  const childEnv: Record<string, string> = {};
  const configKeys = new Set(Object.keys(configSchema.shape));
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !configKeys.has(k)) childEnv[k] = v;
  return Object.assign(childEnv, env);
}

/** Runs `node --import tsx src/main.ts [args]` with only the given config variables. */
export function runMain(env: Record<string, string>, args: string[] = [], untilOutput?: RegExp, timeoutMs = 30_000) {
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

/**
 * The quick start's configuration: no REDIS_URL, so `--dev` starts an embedded redis-server with
 * its data in `<dir>/redis`; free ports (METRICS_PORT 0: the default 9464 may be taken by another
 * test's server running meanwhile).
 */
export function quickStartEnv(dir: string): Record<string, string> {
  return { PORT: '0', HOST: '127.0.0.1', METRICS_PORT: '0', EMBEDDED_REDIS_DIR: join(dir, 'redis') };
}

/**
 * Runs `main.ts --dev` with quickStartEnv in a new temporary folder (removed afterwards), and
 * `use`s it once it has printed its tokens (`out`: the output so far).
 */
export async function withQuickStart(use: (run: ReturnType<typeof runMain>, out: string, dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'quickstart-'));
  try {
    const run = runMain(quickStartEnv(dir), ['--dev'], /BOB=\S+/);
    await use(run, await run.matched!, dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
