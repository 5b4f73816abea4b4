import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, randomInt } from 'node:crypto';
import { waitUntil } from './wait.js';
import { terminate } from './processes.js';

/**
 * A real coturn (`turnserver`, apt `coturn`) for tests: `use-auth-secret` with the secret the
 * server under test signs media-session credentials with (docs/api.md "Media session"), on a free
 * loopback port, relaying on loopback (allow-loopback-peers: both peers of a test are on this
 * machine), or on `relayIp` (the host's address, to reach Janus, whose media has no loopback
 * candidates). Ready once it answers a STUN binding request.
 */

export interface Coturn {
  port: number;
  /** The TURN URL for TURN_URLS (UDP). */
  url: string;
  secret: string;
  logs(): string;
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';
const START_TIMEOUT_MS = 15_000;

export function coturnInstalled(): boolean {
  return spawnSync('turnserver', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** A port free for both UDP and TCP on loopback right now (coturn listens on both). */
async function freeUdpTcpPort(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const udp = createSocket('udp4');
    const port = await new Promise<number>((res, rej) => {
      udp.once('error', rej);
      udp.bind(0, HOST, () => res(udp.address().port));
    });
    const tcpFree = await new Promise<boolean>((res) => {
      const srv = createServer();
      srv.once('error', () => res(false));
      srv.listen(port, HOST, () => srv.close(() => res(true)));
    });
    await new Promise<void>((r) => udp.close(() => r()));
    if (tcpFree) return port;
  }
  throw new Error('no free UDP+TCP port');
}

/** Sends a STUN binding request and resolves true when any STUN response comes back. */
function stunAnswers(port: number, timeoutMs = 300): Promise<boolean> {
  return new Promise((res) => {
    const sock = createSocket('udp4');
    const done = (ok: boolean) => {
      clearTimeout(timer);
      sock.close();
      res(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    sock.on('message', (m) => done(m.length >= 20 && m.readUInt32BE(4) === 0x2112a442));
    sock.on('error', () => done(false));
    const req = Buffer.alloc(20);
    req.writeUInt16BE(0x0001, 0); // Binding request, no attributes
    req.writeUInt32BE(0x2112a442, 4); // magic cookie
    randomBytes(12).copy(req, 8);
    sock.send(req, port, HOST);
  });
}

/** This machine's first non-loopback IPv4 address (where Janus's media candidates are). */
export function hostAddress(): string {
  const address = Object.values(networkInterfaces())
    .flat()
    .find((i) => i?.family === 'IPv4' && !i.internal)?.address;
  if (!address) throw new Error('no non-loopback IPv4 address on this machine');
  return address;
}

export async function startCoturn(secret: string, opts: { relayIp?: string } = {}): Promise<Coturn> {
  const port = await freeUdpTcpPort();
  const dir = mkdtempSync(join(tmpdir(), 'coturn-'));
  // A window of relay ports; coturn skips any that happen to be taken.
  const minPort = 20_000 + randomInt(0, 200) * 200;
  const args = [
    '-n',
    `--listening-ip=${HOST}`,
    `--relay-ip=${opts.relayIp ?? HOST}`,
    `--listening-port=${port}`,
    `--min-port=${minPort}`,
    `--max-port=${minPort + 199}`,
    '--use-auth-secret',
    `--static-auth-secret=${secret}`,
    '--realm=calling.test',
    '--no-tls',
    '--no-dtls',
    '--no-cli',
    '--allow-loopback-peers',
    '--fingerprint',
    '--log-file=stdout',
    '--simple-log',
    `--pidfile=${join(dir, 'turnserver.pid')}`,
    `--userdb=${join(dir, 'turndb')}`,
  ];
  const child: ChildProcess = spawn('turnserver', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (output = (output + c).slice(-200_000)));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (output = (output + c).slice(-200_000)));
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);

  const answers = async () => {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`turnserver exited:\n${output.slice(-4000)}`);
    return stunAnswers(port);
  };
  await waitUntil(`turnserver to answer STUN on ${HOST}:${port}`, answers, START_TIMEOUT_MS, { intervalMs: 0, detail: () => output.slice(-4000) }).catch((err: unknown) => {
    child.kill('SIGKILL');
    throw err;
  });
  return {
    port,
    url: `turn:${HOST}:${port}?transport=udp`,
    secret,
    logs: () => output,
    async stop() {
      process.removeListener('exit', killOnExit);
      await terminate(child, 3000);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
