import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

/** Linux /proc readings for the processes the bench started (server, Redis, generators). */

let ticksPerSecond: number | undefined;
function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** Resident set size in bytes (VmRSS), or undefined when the process is gone. */
export function rssBytes(pid: number): number | undefined {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** CPU time (user + system) the process used so far, in milliseconds. */
export function cpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may contain spaces: fields start after the closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return ((utime + stime) * 1000) / clockTicks();
  } catch {
    return undefined;
  }
}

/** Samples a set of processes' CPU between start() and stop(): share of one core each. */
export class CpuMeter {
  private start = new Map<string, { pid: number; cpu: number }>();
  private t0 = 0;

  constructor(private readonly pids: Record<string, number | undefined>) {}

  begin(): this {
    this.t0 = performance.now();
    this.start.clear();
    for (const [name, pid] of Object.entries(this.pids)) {
      if (pid === undefined) continue;
      const c = cpuMs(pid);
      if (c !== undefined) this.start.set(name, { pid, cpu: c });
    }
    return this;
  }

  /** Share of one core per process since begin() (1 = one full core). */
  end(): Record<string, number> {
    const wall = performance.now() - this.t0;
    const out: Record<string, number> = {};
    for (const [name, { pid, cpu }] of this.start) {
      const c = cpuMs(pid);
      if (c !== undefined && wall > 0) out[name] = (c - cpu) / wall;
    }
    return out;
  }
}

/** Total and idle jiffies of the whole machine, for machine-wide CPU use. */
export function machineCpu(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  const total = v.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

/** This process's open files limit (`ulimit -n`, which a process cannot raise), as `sh` reports it. */
export async function openFilesLimit(): Promise<string> {
  const { execFileSync } = await import('node:child_process');
  try {
    return execFileSync('sh', ['-c', 'ulimit -n']).toString().trim();
  } catch {
    return 'unknown';
  }
}
