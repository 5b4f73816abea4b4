import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The files that take longest, longest first (seconds in a full `npm test` on the 2-core machine,
 * 2026-11-29): they start first, so that the workers end together instead of one running the
 * bench smoke test alone at the end (a fresh clone, as CI runs, has no durations cached, and vitest
 * would order by file size and by project). Every other file follows in vitest's own order.
 */
export const SLOWEST_FILES: readonly string[] = [
  'test/e2e/bench-smoke.test.ts', // 132
  'test/integration/keyspace-bounds.test.ts', // 77
  // The media project's files run in a phase of their own after the rest (vitest.config.ts), in this order.
  'test/browser/softphone-long-call.test.ts', // 101
  'test/browser/softphone.test.ts', // 62
  'test/browser/janus-group.test.ts', // 57
  'test/e2e/image.test.ts', // 54
  'test/integration/malformed-http.test.ts', // 36
  'test/e2e/fuzz.test.ts', // 32
  'test/e2e/slow-consumer.test.ts', // 24
  'test/e2e/command-budget.test.ts', // 22
  'test/e2e/client.test.ts', // 20, on each topology
  'test/e2e/webhooks-crash.test.ts', // 19
  'test/cluster/failover.test.ts', // 19
  'test/e2e/call-policy.test.ts', // 17, on each topology
];

export default class SlowestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (f: TestSpecification) => {
      const i = SLOWEST_FILES.findIndex((p) => f.moduleId.endsWith(`/${p}`));
      return i < 0 ? SLOWEST_FILES.length : i;
    };
    // Array.prototype.sort is stable: the rest keep vitest's order.
    return sorted.sort((a, b) => rank(a) - rank(b));
  }
}
