import { Socket } from 'node:net';

/**
 * Every command a Redis runs, as `MONITOR` reports it: commands sent by clients and, below each
 * script call, the commands the script ran (`[0 lua]`), in the order Redis ran them. Used by the
 * command budget (test/e2e/command-budget.test.ts) to count what a call lifecycle costs and to
 * tell it apart from the periodic work a server does whether calls come or not.
 */

export interface MonitoredCommand {
  /** Redis's own time of the command, in microseconds. */
  atUs: number;
  /** The client's address (`127.0.0.1:port`), or `lua` for a command run by a script. */
  client: string;
  /** The command name, lower case. */
  name: string;
  args: string[];
  /** For a command run by a script: the index of the script call (EVAL/EVALSHA/FCALL) it ran under. */
  parent?: number;
}

export interface CommandMonitor {
  /** Everything seen since the monitor started (or since the last `take`). */
  take(): MonitoredCommand[];
  /** Resolves once a marker command sent after this call has been seen: everything before it is in `take()`. */
  barrier(): Promise<void>;
  close(): void;
}

const SCRIPT_CALLS = new Set(['eval', 'evalsha', 'eval_ro', 'evalsha_ro', 'fcall', 'fcall_ro']);

/** Starts MONITOR on its own connection to the Redis on 127.0.0.1:`port`. */
export async function monitorCommands(port: number): Promise<CommandMonitor> {
  const socket = new Socket();
  let seen: MonitoredCommand[] = [];
  let lastScript: number | undefined;
  let pending = '';
  let markers = 0;
  const waiting = new Map<string, () => void>();
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.connect(port, '127.0.0.1', () => {
      socket.off('error', reject);
      resolve();
    });
  });
  socket.on('error', () => {});
  socket.setEncoding('latin1');
  const started = new Promise<void>((resolve) => {
    socket.on('data', (chunk: string) => {
      pending += chunk;
      let nl: number;
      while ((nl = pending.indexOf('\r\n')) >= 0) {
        // Each command comes as a status reply: `+<line>`.
        const line = pending.slice(1, nl);
        pending = pending.slice(nl + 2);
        if (line === 'OK') {
          resolve();
          continue;
        }
        const c = parseMonitorLine(line);
        if (!c) continue;
        // The marker: an ECHO on a connection of the monitor's own (a monitoring connection can send nothing else).
        if (c.name === 'echo' && c.args[0]?.startsWith('command-monitor-marker-') && waiting.has(c.args[0])) {
          waiting.get(c.args[0])!();
          waiting.delete(c.args[0]);
          continue;
        }
        if (c.client === 'lua') c.parent = lastScript;
        else lastScript = SCRIPT_CALLS.has(c.name) ? seen.length : undefined;
        seen.push(c);
      }
    });
  });
  socket.write('*1\r\n$7\r\nMONITOR\r\n');
  await started;
  return {
    take() {
      const out = seen;
      seen = [];
      lastScript = undefined;
      return out;
    },
    async barrier() {
      const marker = `command-monitor-marker-${++markers}`;
      const arrived = new Promise<void>((resolve) => waiting.set(marker, resolve));
      const other = new Socket();
      other.on('error', () => {});
      other.connect(port, '127.0.0.1', () => other.write(`*2\r\n$4\r\nECHO\r\n$${marker.length}\r\n${marker}\r\n`));
      try {
        await arrived;
      } finally {
        other.destroy();
      }
    },
    close() {
      socket.destroy();
    },
  };
}

/** `1700000000.123456 [0 127.0.0.1:5000] "HSET" "key" "a\"b"` → the command; undefined for anything else. */
export function parseMonitorLine(line: string): MonitoredCommand | undefined {
  const head = /^(\d+)\.(\d+) \[\d+ ([^\]]+)\] /.exec(line);
  if (!head) return undefined;
  const args: string[] = [];
  let i = head[0].length;
  while (i < line.length) {
    if (line[i] === ' ') {
      i++;
      continue;
    }
    if (line[i] !== '"') return undefined;
    let arg = '';
    i++;
    while (i < line.length && line[i] !== '"') {
      if (line[i] === '\\') {
        const next = line[i + 1];
        if (next === 'x') {
          arg += String.fromCharCode(parseInt(line.slice(i + 2, i + 4), 16));
          i += 4;
          continue;
        }
        arg += next === 'n' ? '\n' : next === 'r' ? '\r' : next === 't' ? '\t' : next === 'a' ? '\x07' : next === 'b' ? '\b' : next;
        i += 2;
        continue;
      }
      arg += line[i];
      i++;
    }
    i++;
    args.push(arg);
  }
  const [name, ...rest] = args;
  if (name === undefined) return undefined;
  return { atUs: Number(head[1]) * 1e6 + Number(head[2]), client: head[3]!, name: name.toLowerCase(), args: rest };
}
