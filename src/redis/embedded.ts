import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { resolve } from 'node:path';

/**
 * The quick start's embedded Redis: a `redis-server` child on a free loopback port, with a data
 * directory and append-only persistence, stopped when this process exits (even by SIGKILL).
 */
export interface EmbeddedRedis {
  url: string;
  /** Its process id (logged, so that one can see it stopped). */
  pid: number;
  stop(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? res(addr.port) : rej(new Error('no port'))));
    });
  });
}

export async function startEmbeddedRedis(dataDir: string): Promise<EmbeddedRedis> {
  const dir = resolve(dataDir);
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  // A process group of its own (detached): a terminal's Ctrl-C goes to the foreground group and
  // must reach only the server, which drains and closes first and stops Redis after, instead of
  // losing its Redis mid-request (README "Quick start").
  const child: ChildProcess = spawn(
    'redis-server',
    // hz 100: Redis notices an expired blocking read (BullMQ's ring-timer wait) within 10 ms
    // instead of 100 ms (docs/operations.md "Operations").
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--save', '', '--daemonize', 'no', '--loglevel', 'warning', '--hz', '100'],
    { stdio: ['ignore', 'ignore', 'inherit'], detached: true },
  );
  // Out of the terminal's reach, Redis would outlive a server killed with SIGKILL. A guard shell
  // holds the read end of a pipe whose only writer is this process: when this process is gone,
  // however it went, `read` sees end of file and the guard stops Redis. While Redis runs it is
  // this process's unreaped child, so its pid cannot have been reused by then.
  const guard = spawn('sh', ['-c', 'read _; kill -TERM "$0" 2>/dev/null', String(child.pid)], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
  const killOnExit = () => child.kill('SIGTERM');
  process.once('exit', killOnExit);
  const exited = new Promise<void>((res) =>
    child.once('exit', () => {
      process.off('exit', killOnExit);
      guard.kill('SIGKILL');
      res();
    }),
  );
  await waitForPort(port, child);
  return {
    url: `redis://127.0.0.1:${port}`,
    pid: child.pid!,
    stop: () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

async function waitForPort(port: number, child: ChildProcess): Promise<void> {
  const { Socket } = await import('node:net');
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`embedded redis-server exited with code ${child.exitCode}`);
    const ok = await new Promise<boolean>((res) => {
      const s = new Socket();
      s.once('connect', () => {
        s.write('PING\r\n');
      });
      s.once('data', (d) => {
        s.destroy();
        res(d.toString().startsWith('+PONG'));
      });
      s.once('error', () => res(false));
      s.connect(port, '127.0.0.1');
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('embedded redis-server did not start');
}
