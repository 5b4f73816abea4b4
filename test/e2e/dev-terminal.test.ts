import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../support/server.js';
import { configEnv, quickStartEnv, withQuickStart } from '../support/mainProcess.js';
import { waitUntil, within } from '../support/wait.js';
import { devBanner } from '../../src/demo/devBanner.js';

/**
 * `npm run dev` as a newcomer uses it (README "Quick start"): in a terminal, the printed example
 * pasted more than once, then Ctrl-C; and what is left when the server is killed instead. Linux
 * only (util-linux `script`, /proc): vitest.config.ts leaves it out elsewhere.
 */

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

describe('npm run dev in a terminal', () => {
  it('the printed example makes a new call at every paste, with or without curl, and Ctrl-C stops the server and then its Redis quietly, with exit code 0', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'quickstart-'));
    // script (util-linux) runs the command on a pseudo-terminal, in that terminal's foreground
    // process group, and types what is written to its input: a Ctrl-C goes to the whole group.
    // That is why package.json's dev script is `exec node --import tsx ...`: the sh of an npm
    // script dies of the SIGINT (npm then exits 130 while the server still shuts down), and tsx's
    // CLI kills a child that does not report the signal to it within 30 ms.
    const env = configEnv(quickStartEnv(dir));
    // script runs its command through $SHELL -c; `exec` makes that shell npm itself, as an
    // interactive shell keeps out of its job's process group. Without it, dash (CI's /bin/sh,
    // which does not exec a lone command) dies of the Ctrl-C and script reports 130.
    const term = spawn('script', ['-qfec', 'exec npm run dev', '/dev/null'], { cwd: REPO_ROOT, env });
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

  it('the embedded Redis does not outlive a server killed with SIGKILL', () =>
    withQuickStart(async (run, out) => {
      const redisPid = Number(/"redisPid":(\d+)/.exec(out)?.[1]);
      const redis = descendants(run.child.pid!).find((p) => p.pid === redisPid)!;
      expect(redis && running(redis)).toBe(true);
      run.child.kill('SIGKILL');
      await run.exited;
      await waitUntil('the embedded redis-server gone', () => !running(redis), 10_000);
    }));
});
