import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * Two projects in one run:
 *  - `single`: every suite against a single redis-server per test file;
 *  - `cluster`: the lifecycle, signaling, push and timer suites again, each file against its own
 *    local Redis Cluster of 3 primaries and 3 replicas (test/support/stack.ts, ON_CLUSTER), plus
 *    the cluster-only suites in test/cluster/ (failover, data spread).
 */
const CLUSTER_SUITES = [
  'test/integration/calls-lifecycle.test.ts',
  'test/integration/calls-answer.test.ts',
  'test/integration/calls-end-reasons.test.ts',
  'test/integration/calls-expiry.test.ts',
  'test/integration/calls-idempotency.test.ts',
  'test/integration/busy-rename.test.ts',
  'test/e2e/signaling-audience.test.ts',
  'test/e2e/signaling-protocol.test.ts',
  'test/e2e/event-log-gaps.test.ts',
  'test/e2e/multi-process-resume.test.ts',
  'test/e2e/relay-leases.test.ts',
  'test/e2e/client.test.ts',
  'test/e2e/call-messages.test.ts',
  'test/e2e/push-invitations.test.ts',
  'test/e2e/push-signals.test.ts',
  'test/e2e/push-retries.test.ts',
  'test/e2e/push-upgrade.test.ts',
  'test/e2e/server-timers.test.ts',
  'test/e2e/push-timers.test.ts',
  'test/cluster/**/*.test.ts',
];

export default defineConfig({
  // Tests run the client package from its source (packages/client/src), so they need no build;
  // typecheck and tsx resolve it the same way through tsconfig.json "paths". The packed package
  // itself is tested by test/e2e/client-package.test.ts.
  resolve: { alias: { '@calling-backend/client': fileURLToPath(new URL('./packages/client/src/index.ts', import.meta.url)) } },
  test: {
    // Integration tests start their own redis-server and server processes: give them room,
    // and keep parallelism modest on a 2-core machine.
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default'],
    projects: [
      { extends: true, test: { name: 'single', include: ['test/**/*.test.ts'], exclude: ['test/cluster/**'] } },
      { extends: true, test: { name: 'cluster', include: CLUSTER_SUITES, env: { TEST_REDIS_CLUSTER: '1' } } },
    ],
  },
});
