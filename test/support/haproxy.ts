import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { diesWithParent, freePort } from './redis-server.js';
import { REPO_ROOT } from './server.js';
import { waitUntil } from './wait.js';
import { terminate } from './processes.js';

/**
 * A real haproxy (Debian's package) running the shipped deploy/haproxy/haproxy.cfg, with only
 * its addresses and ports changed: the frontend on a free loopback port, each `server` line on
 * the loopback port of a test server. A second configuration file adds an admin socket, through
 * which a test reads haproxy's own view of its servers (`show stat`): their state and the last
 * health check's result.
 */

export const HAPROXY_CONFIG = join(REPO_ROOT, 'deploy/haproxy/haproxy.cfg');

/** One backend server as haproxy sees it (a row of `show stat`). */
export interface ServerState {
  name: string;
  /** `UP`, `DOWN`, or a transition such as `UP 1/2` (going down) and `DOWN 1/2` (coming up). */
  status: string;
  /** The last check's outcome: `L7OK`, `L7STS` (a status other than expected), `L4CON` (refused)… */
  checkStatus: string;
  /** The HTTP status the last check got (empty when it got none). */
  checkCode: string;
  /** Connections sent to this server so far. */
  sessions: number;
}

export interface Haproxy {
  /** `http://127.0.0.1:<port>`: the frontend. */
  url: string;
  servers(): Promise<ServerState[]>;
  /** Points a server at another loopback port, as a re-resolved name does for a replaced container. */
  moveServer(name: string, port: number): Promise<void>;
  logs(): string;
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';
const PORT_ATTEMPTS = 5;

/**
 * The shipped configuration with the frontend bound to `port` and each server pointed at the
 * loopback port given for its name. Fails if the file no longer has exactly those lines, so a
 * change to it cannot silently leave this test running something else.
 */
export function shippedConfig(port: number, serverPorts: Record<string, number>): string {
  const text = readFileSync(HAPROXY_CONFIG, 'utf8');
  const binds = text.match(/^\s*bind :8080$/gm) ?? [];
  if (binds.length !== 1) throw new Error(`${HAPROXY_CONFIG}: expected one "bind :8080" line`);
  const seen: string[] = [];
  const out = text
    .replace(/^(\s*bind) :8080$/m, `$1 ${HOST}:${port}`)
    .replace(/^(\s*server) (\S+) (\S+):8080$/gm, (_m, kw: string, name: string) => {
      seen.push(name);
      const p = serverPorts[name];
      if (p === undefined) throw new Error(`${HAPROXY_CONFIG}: no port given for server ${name}`);
      return `${kw} ${name} ${HOST}:${p}`;
    });
  if (seen.sort().join() !== Object.keys(serverPorts).sort().join()) {
    throw new Error(`${HAPROXY_CONFIG}: servers ${seen.join(', ')}, expected ${Object.keys(serverPorts).join(', ')}`);
  }
  return out;
}

export async function startHaproxy(serverPorts: Record<string, number>): Promise<Haproxy> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'haproxy-'));
    const socket = join(dir, 'admin.sock');
    writeFileSync(join(dir, 'haproxy.cfg'), shippedConfig(port, serverPorts));
    writeFileSync(join(dir, 'admin.cfg'), `global\n  stats socket ${socket} mode 600 level admin\n`);
    // -db: in the foreground. Its connection limit follows this process's open-file limit.
    const { command, argv } = diesWithParent('haproxy', ['-db', '-f', join(dir, 'haproxy.cfg'), '-f', join(dir, 'admin.cfg')]);
    const child: ChildProcess = spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const keep = (c: string) => (output = (output + c).slice(-100_000));
    child.stdout!.setEncoding('utf8').on('data', keep);
    child.stderr!.setEncoding('utf8').on('data', keep);
    const proxy: Haproxy = {
      url: `http://${HOST}:${port}`,
      servers: () => showStat(socket),
      async moveServer(name, p) {
        const reply = await admin(socket, `set server calling/${name} addr ${HOST} port ${p}`);
        if (!/changed/.test(reply)) throw new Error(`haproxy: ${reply}`);
      },
      logs: () => output,
      async stop() {
        // SIGTERM: haproxy stops at once, closing what is still open.
        await terminate(child, 3000);
        rmSync(dir, { recursive: true, force: true });
      },
    };
    try {
      await waitUntil(`haproxy answering on its admin socket; output:\n${output}`, async () => {
        if (child.exitCode !== null) throw new Error(`haproxy exited ${child.exitCode}:\n${output}`);
        return showStat(socket).then(() => true, () => false);
      }, 10_000);
      return proxy;
    } catch (err) {
      await proxy.stop();
      if (attempt < PORT_ATTEMPTS && /cannot bind socket|Address already in use/i.test(output)) continue;
      throw err;
    }
  }
}

/** One command over the admin socket, and its whole answer. */
function admin(socket: string, command: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const conn = connect(socket);
    let text = '';
    conn.setEncoding('utf8');
    conn.on('data', (c: string) => (text += c));
    conn.on('end', () => resolve(text));
    conn.on('error', reject);
    conn.end(`${command}\n`);
  });
}

/** `show stat`: the backend's server rows. */
async function showStat(socket: string): Promise<ServerState[]> {
  const csv = await admin(socket, 'show stat');
  const [header, ...rows] = csv.trim().split('\n');
  if (!header?.startsWith('# ')) throw new Error(`unexpected show stat output: ${csv.slice(0, 200)}`);
  const cols = header.slice(2).split(',');
  const col = (row: string[], name: string) => row[cols.indexOf(name)] ?? '';
  return rows
    .map((r) => r.split(','))
    .filter((r) => col(r, 'pxname') === 'calling' && !['FRONTEND', 'BACKEND'].includes(col(r, 'svname')))
    .map((r) => ({
      name: col(r, 'svname'),
      status: col(r, 'status'),
      checkStatus: col(r, 'check_status').replace(/^\* /, ''),
      checkCode: col(r, 'check_code'),
      sessions: Number(col(r, 'stot')),
    }));
}
