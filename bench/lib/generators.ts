import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT, track } from './processes.js';

/**
 * Load generator processes. Each is `bench/workers/worker.ts` forked with the tsx loader, runs one
 * task (see workers/tasks.ts) and reports its own CPU time for every run, so a run where a
 * generator was the bottleneck is flagged. Several processes share a load: the caller gives each
 * its share and merges their histograms.
 */

export interface CpuReport {
  /** User + system CPU of the generator during the run, ms. */
  cpuMs: number;
  wallMs: number;
  /** cpuMs / wallMs: share of one core (1 = a full core). */
  share: number;
}

export interface RunOutput<R> {
  index: number;
  pid: number;
  result: R;
  cpu: CpuReport;
}

/** A generator above this share of one core is the likely bottleneck of its run. */
export const GENERATOR_BOUND_SHARE = 0.85;

type FromWorker =
  | { type: 'ready'; info: unknown }
  | { type: 'progress'; id: number; data: unknown }
  | { type: 'result'; id: number; result: unknown; cpu: CpuReport }
  | { type: 'error'; id?: number; message: string };

interface Pending {
  resolve: (v: { result: unknown; cpu: CpuReport }) => void;
  reject: (e: Error) => void;
}

class Generator {
  private pending = new Map<number, Pending>();
  private nextId = 1;
  private readyWaiter: Pending | undefined;
  onProgress: ((index: number, data: unknown) => void) | undefined;

  constructor(
    readonly index: number,
    readonly child: ChildProcess,
  ) {
    child.on('message', (raw) => this.onMessage(raw as FromWorker));
    child.once('exit', (code, signal) => {
      const err = new Error(`generator ${index} exited (code ${code}, signal ${signal})`);
      this.readyWaiter?.reject(err);
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    });
  }

  setup(task: string, params: unknown): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.readyWaiter = { resolve: (v) => resolve(v.result), reject };
      this.child.send({ type: 'setup', task, params });
    });
  }

  run(params: unknown): Promise<{ result: unknown; cpu: CpuReport }> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ type: 'run', id, params });
    });
  }

  private onMessage(m: FromWorker): void {
    switch (m.type) {
      case 'ready':
        this.readyWaiter?.resolve({ result: m.info, cpu: { cpuMs: 0, wallMs: 0, share: 0 } });
        this.readyWaiter = undefined;
        return;
      case 'progress':
        this.onProgress?.(this.index, m.data);
        return;
      case 'result': {
        const p = this.pending.get(m.id);
        this.pending.delete(m.id);
        p?.resolve({ result: m.result, cpu: m.cpu });
        return;
      }
      case 'error': {
        const err = new Error(`generator ${this.index}: ${m.message}`);
        if (m.id === undefined) {
          this.readyWaiter?.reject(err);
          this.readyWaiter = undefined;
        } else {
          const p = this.pending.get(m.id);
          this.pending.delete(m.id);
          p?.reject(err);
        }
      }
    }
  }
}

export class GeneratorPool {
  private constructor(
    private readonly gens: Generator[],
    readonly setupInfo: unknown[],
  ) {}

  /** Forks `n` generators and sets each up for `task` with `setup(i)`. */
  static async start(n: number, task: string, setup: (i: number) => unknown): Promise<GeneratorPool> {
    const gens: Generator[] = [];
    for (let i = 0; i < n; i++) {
      const child = fork(join(REPO_ROOT, 'bench/workers/worker.ts'), [], {
        cwd: REPO_ROOT,
        execArgv: ['--import', 'tsx'],
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        serialization: 'advanced',
      });
      track(child);
      gens.push(new Generator(i, child));
    }
    try {
      const info = await Promise.all(gens.map((g) => g.setup(task, setup(g.index))));
      return new GeneratorPool(gens, info);
    } catch (err) {
      for (const g of gens) g.child.kill('SIGKILL');
      throw err;
    }
  }

  get size(): number {
    return this.gens.length;
  }

  pids(): number[] {
    return this.gens.map((g) => g.child.pid!);
  }

  /** Runs once on every generator with `params(i)`; resolves with every generator's output. */
  async run<R>(params: (i: number) => unknown, onProgress?: (index: number, data: unknown) => void): Promise<RunOutput<R>[]> {
    for (const g of this.gens) g.onProgress = onProgress;
    const outs = await Promise.all(
      this.gens.map(async (g) => {
        const { result, cpu } = await g.run(params(g.index));
        return { index: g.index, pid: g.child.pid!, result: result as R, cpu };
      }),
    );
    for (const g of this.gens) g.onProgress = undefined;
    return outs;
  }

  async close(): Promise<void> {
    await Promise.all(
      this.gens.map(
        (g) =>
          new Promise<void>((res) => {
            if (g.child.exitCode !== null || g.child.signalCode !== null) return res();
            const t = setTimeout(() => g.child.kill('SIGKILL'), 5000);
            g.child.once('exit', () => {
              clearTimeout(t);
              res();
            });
            g.child.send({ type: 'teardown' });
          }),
      ),
    );
  }
}

/** Summarises the generators' CPU for a run: the busiest one decides whether it was generator-bound. */
export function generatorCpu(outs: readonly RunOutput<unknown>[]): { maxShare: number; totalShare: number; bound: boolean; perProcess: number[] } {
  const perProcess = outs.map((o) => o.cpu.share);
  const maxShare = Math.max(0, ...perProcess);
  return { maxShare, totalShare: perProcess.reduce((a, b) => a + b, 0), bound: maxShare > GENERATOR_BOUND_SHARE, perProcess };
}
