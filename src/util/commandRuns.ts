import { spawnSync } from 'node:child_process';

/** Whether `command --version` runs: the tool is installed and on the PATH. */
export function commandRuns(command: string): boolean {
  return spawnSync(command, ['--version'], { stdio: 'ignore' }).status === 0;
}
