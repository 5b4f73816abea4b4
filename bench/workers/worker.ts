import { TASKS } from './tasks.js';
import type { Task } from './task.js';

/**
 * A load generator process (forked by bench/lib/generators.ts). It sets up one task, runs it as
 * often as told, and reports each run's result with the CPU this process used meanwhile.
 */

type FromParent =
  | { type: 'setup'; task: string; params: unknown }
  | { type: 'run'; id: number; params: unknown }
  | { type: 'teardown' };

let task: Task | undefined;

function send(msg: unknown): void {
  process.send?.(msg);
}

process.on('message', (raw) => {
  const m = raw as FromParent;
  void handle(m).catch((err: unknown) => {
    send({ type: 'error', id: m.type === 'run' ? m.id : undefined, message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  });
});
process.on('disconnect', () => process.exit(0));

async function handle(m: FromParent): Promise<void> {
  switch (m.type) {
    case 'setup': {
      const factory = TASKS[m.task];
      if (!factory) throw new Error(`unknown task ${m.task}`);
      task = await factory();
      const info = await task.setup(m.params);
      send({ type: 'ready', info });
      return;
    }
    case 'run': {
      if (!task) throw new Error('run before setup');
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      const result = await task.run(m.params, (data) => send({ type: 'progress', id: m.id, data }));
      const used = process.cpuUsage(cpu0);
      const wallMs = performance.now() - t0;
      const cpuMs = (used.user + used.system) / 1000;
      send({ type: 'result', id: m.id, result, cpu: { cpuMs, wallMs, share: wallMs > 0 ? cpuMs / wallMs : 0 } });
      return;
    }
    case 'teardown':
      await task?.teardown?.().catch(() => {});
      process.exit(0);
  }
}
