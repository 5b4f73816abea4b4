import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * A directory at the package root (`lua/`, `demo/`) seen from a module, which runs either from
 * `src/<dir>/` (tsx) or from `dist/src/<dir>/` (the build): the first candidate holding `marker`.
 */
export function packageDir(moduleUrl: string, name: string, marker: string): string {
  const here = dirname(fileURLToPath(moduleUrl));
  const candidates = [join(here, '../..', name), join(here, '../../..', name)];
  return candidates.find((d) => existsSync(join(d, marker))) ?? candidates[0]!;
}
