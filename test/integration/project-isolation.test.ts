import { expect, it } from 'vitest';
import { ON_CLUSTER } from '../support/stack.js';

/**
 * Test files share their worker's modules (vitest.config.ts `isolate: false`), so a module's state
 * outlives the file that made it. This file runs in both projects: a worker is never shared between
 * them, so test/support/stack.ts, read once per worker, names the topology of the file's project.
 */
it("a worker's modules belong to one project: test/support/stack.ts's topology is the file's project's", ({ task }) => {
  expect(process.env.TEST_REDIS_CLUSTER === '1').toBe(task.file.projectName === 'cluster');
  expect(ON_CLUSTER).toBe(task.file.projectName === 'cluster');
});
