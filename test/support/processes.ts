import type { ChildProcess } from 'node:child_process';

/**
 * Stops a process the suite started: SIGTERM (every program here shuts down cleanly on it), then
 * SIGKILL if it is still there after `graceMs`. Resolves once it has exited; at once when it
 * never started or already exited.
 */
export function terminate(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Whether a process is running: EPERM means alive but someone else's (another user's test run). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
