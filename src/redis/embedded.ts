import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { resolve } from 'node:path';

/**
 * The quick start's embedded Redis: a `redis-server` child on a free loopback port, with a data
 * directory and append-only persistence, stopped when this process exits.
 */
export interface EmbeddedRedis {
  url: string;
  stop(): Promise<void>;
}

export function redisServerOnPath(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
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
  const child: ChildProcess = spawn(
    'redis-server',
    // hz 100: Redis notices an expired blocking read (BullMQ's ring-timer wait) within 10 ms
    // instead of 100 ms (docs/operations.md "Operations").
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--save', '', '--daemonize', 'no', '--loglevel', 'warning', '--hz', '100'],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const killOnExit = () => child.kill('SIGTERM');
  process.once('exit', killOnExit);
  await waitForPort(port, child);
  return {
    url: `redis://127.0.0.1:${port}`,
    stop: () =>
      new Promise((res) => {
        process.off('exit', killOnExit);
        if (child.exitCode !== null) return res();
        child.once('exit', () => res());
        child.kill('SIGTERM');
      }),
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
