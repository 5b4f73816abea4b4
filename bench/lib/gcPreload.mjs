import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Preloaded (`--expose-gc --import bench/lib/gcPreload.mjs`) into the processes the bench starts:
 * SIGUSR2 runs a full garbage collection and writes `process.memoryUsage()` to
 * `<tmpdir>/bench-mem-<pid>.json`, so memory readings count what is retained, not garbage that
 * happens not to be collected yet. Changes nothing else in the process. Plain JavaScript, so that
 * a server runs its bundle as production does, without tsx's module loader.
 */
process.on('SIGUSR2', () => {
  globalThis.gc?.();
  try {
    writeFileSync(join(tmpdir(), `bench-mem-${process.pid}.json`), JSON.stringify({ at: Date.now(), ...process.memoryUsage() }));
  } catch {
    /* best effort */
  }
});
