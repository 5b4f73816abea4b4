import { fileURLToPath } from 'node:url';
import { defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';
import SlowestFirst from './test/support/sequencer.js';

/**
 * Three projects in one run:
 *  - `single`: every suite against a single redis-server per test file;
 *  - `cluster`: the lifecycle, signaling, push, timer and group call suites again, each file against its own
 *    local Redis Cluster of 3 primaries and 3 replicas (test/support/stack.ts, ON_CLUSTER), plus
 *    the cluster-only suites in test/cluster/ (failover, data spread);
 *  - `media`: the browser media suites (MEDIA_SUITES), after the other two, one file at a time.
 */
const CLUSTER_SUITES = [
  'test/integration/calls-lifecycle.test.ts',
  'test/integration/calls-answer.test.ts',
  'test/integration/calls-end-reasons.test.ts',
  'test/integration/calls-expiry.test.ts',
  'test/integration/calls-idempotency.test.ts',
  'test/integration/busy-rename.test.ts',
  'test/integration/create-limits.test.ts',
  'test/integration/call-record-format.test.ts',
  'test/e2e/signaling-audience.test.ts',
  'test/e2e/signaling-protocol.test.ts',
  'test/e2e/event-log-gaps.test.ts',
  'test/e2e/multi-process-resume.test.ts',
  'test/e2e/reconnect-storm.test.ts',
  'test/e2e/relay-leases.test.ts',
  'test/e2e/client.test.ts',
  'test/e2e/call-messages.test.ts',
  'test/e2e/live-signals.test.ts',
  'test/e2e/call-move.test.ts',
  'test/e2e/messages-chaos.test.ts',
  'test/e2e/push-invitations.test.ts',
  'test/e2e/push-signals.test.ts',
  'test/e2e/push-handover.test.ts',
  'test/e2e/push-retries.test.ts',
  'test/e2e/push-upgrade.test.ts',
  'test/e2e/server-timers.test.ts',
  'test/e2e/push-timers.test.ts',
  'test/integration/call-history.test.ts',
  'test/e2e/server-api.test.ts',
  'test/e2e/webhooks.test.ts',
  'test/e2e/one-to-one-golden.test.ts',
  'test/e2e/group-calls.test.ts',
  'test/e2e/group-pushes.test.ts',
  'test/e2e/push-missed-calls.test.ts',
  'test/e2e/push-missed-seen.test.ts',
  'test/e2e/group-model.test.ts',
  'test/e2e/call-policy.test.ts',
  'test/integration/project-isolation.test.ts',
  'test/cluster/**/*.test.ts',
];

/**
 * Real-time media in Chromium (WebRTC through Janus and coturn): ICE, DTLS and RTP keep time, and a
 * page on a starved machine misses it (a DTLS packet lost on a full socket buffer is sent again
 * after 1, 2, 4, 8, 16 s). They run in a phase of their own after every other file
 * (sequence.groupOrder), one at a time. Beside the bench smoke test, a Docker image build and a
 * third file, both calls of test/browser/softphone-long-call.test.ts once got no media for 30 s in
 * CI, the only failures of that run; two of these files at a time, softphone.test.ts's relayed
 * call took about 40 s to connect (7 s alone) and the file 268 s (111 alone). Alone, the phase
 * takes about 6 minutes here, and the first phase about a third of that less.
 */
const MEDIA_SUITES = ['test/browser/**/*.test.ts'];

/**
 * Suites that need more than redis-server (docs/development.md "Faster loops"): Chromium, coturn,
 * haproxy, a Docker engine, or debootstrap and the network (the Node matrix, the image).
 * `npm run test:fast` leaves them out, with the cluster project; `npm run test:unit` runs
 * test/unit only (no Redis at all).
 */
const HEAVY_SUITES = [
  ...MEDIA_SUITES,
  'test/e2e/client-browser.test.ts',
  'test/e2e/node-versions.test.ts',
  'test/e2e/image.test.ts',
  'test/e2e/proxy.test.ts',
  'test/integration/turn-allocation.test.ts',
  'test/integration/janus-media.test.ts',
  'test/integration/janus-placement.test.ts',
  'test/integration/janus-crash-report.test.ts',
  'test/unit/bench-report.test.ts',
];

/**
 * Suites that read Linux's /proc or drive util-linux's `script`: `npm run test:fast` leaves them
 * out on other systems (macOS), where `npm test` cannot run at all (docs/development.md "Platforms").
 */
const LINUX_ONLY_SUITES = [
  'test/e2e/dev-terminal.test.ts',
  'test/e2e/slow-consumer.test.ts',
  // The bench (bench/lib/procstat.ts) reads every process's CPU from /proc; it needs only redis-server besides.
  'test/e2e/bench-smoke.test.ts',
];

/** `npm test` runs everything; TEST_SCOPE=fast or unit narrows it (package.json scripts). */
const scope = process.env.TEST_SCOPE ?? 'all';
if (!['all', 'fast', 'unit'].includes(scope)) throw new Error(`TEST_SCOPE must be fast or unit, not ${scope}`);
/**
 * Files run at a time: 3 unless TEST_MAX_WORKERS says (docs/development.md "Faster loops"). Most
 * files wait more than they compute (a retention running out, a ring window, a media credential's
 * lifetime), so on two cores a third file keeps the cores busy instead of about half.
 */
const workers = Number(process.env.TEST_MAX_WORKERS ?? 3);
if (!Number.isInteger(workers) || workers < 1) throw new Error(`TEST_MAX_WORKERS must be a whole number of at least 1, not ${process.env.TEST_MAX_WORKERS}`);

const single: TestProjectInlineConfiguration = {
  extends: true,
  test: {
    name: 'single',
    include: scope === 'unit' ? ['test/unit/**/*.test.ts'] : ['test/**/*.test.ts'],
    exclude: ['test/cluster/**', ...MEDIA_SUITES, ...(scope === 'all' ? [] : HEAVY_SUITES), ...(process.platform === 'linux' ? [] : LINUX_ONLY_SUITES)],
    sequence: { groupOrder: 0 },
  },
};
const cluster: TestProjectInlineConfiguration = {
  extends: true,
  test: { name: 'cluster', include: CLUSTER_SUITES, env: { TEST_REDIS_CLUSTER: '1' }, sequence: { groupOrder: 0 } },
};
const media: TestProjectInlineConfiguration = {
  extends: true,
  test: { name: 'media', include: MEDIA_SUITES, maxWorkers: 1, sequence: { groupOrder: 1 } },
};

export default defineConfig({
  // Tests run the client package from its source (packages/client/src), so they need no build;
  // typecheck and tsx resolve it the same way through tsconfig.json "paths". The packed package
  // itself is tested by test/e2e/client-package.test.ts.
  resolve: { alias: { '@calling-backend/client': fileURLToPath(new URL('./packages/client/src/index.ts', import.meta.url)) } },
  test: {
    // Integration tests start their own redis-server and server processes: give them room. A
    // file's stack started in its beforeAll took over 60 s once, in a full run at twice its usual
    // time (the image build and the browsers beside it, the page cache cold after a reclaim).
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // expect.poll without a timeout of its own waits 10 s, not vitest's 1 s: what it waits for (a
    // page's event list, a stats reading, a Redis key) takes longer than a second on a starved machine.
    expect: { poll: { timeout: 10_000 } },
    pool: 'forks',
    // A worker runs its files one after another in one process, each module evaluated once: a
    // third less CPU than a fresh process per file (zod, ioredis, the src tree, the test support
    // imported 200 times). Tests restore what they change (timers, env); each project has its own
    // workers (test/integration/project-isolation.test.ts).
    isolate: false,
    // Builds the server the tests start, once (test/support/serverBuild.ts).
    globalSetup: ['test/support/globalSetup.ts'],
    // Kills the server processes a file left running (they would outlive it: isolate is off).
    setupFiles: ['test/support/fileEnd.ts'],
    maxWorkers: workers,
    // The slowest files first (test/support/sequencer.ts), so that the workers end together.
    sequence: { sequencer: SlowestFirst },
    reporters: ['default'],
    projects: scope === 'all' ? [single, cluster, media] : [single],
  },
});
