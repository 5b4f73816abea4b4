import { afterAll } from 'vitest';
import { killLeftoverServers } from './server.js';

/**
 * After each test file (vitest.config.ts setupFiles; its after-hooks run last): the server
 * processes the file did not stop are killed, as they were when each file had a process of its
 * own. A file's own afterAll stops its stack first; this names what slipped through.
 */
afterAll(() => {
  const n = killLeftoverServers();
  if (n > 0) process.stderr.write(`test/support/fileEnd.ts: ${n} server process(es) left running by this file, killed\n`);
});
