import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stageOf, summariseProfile } from '../../bench/lib/profile.js';
import { REPO_ROOT } from '../../bench/lib/processes.js';
import { spreadOf, verdict } from '../../bench/lib/spread.js';

/** The bench's cost analyses (bench/README.md, "Comparing two builds"): stages of a profile, medians and verdicts. */
describe('CPU profile by stage', () => {
  it('charges each sample to its innermost project frame; a stack without one to its own origin', () => {
    const file = (rel: string) => `file://${REPO_ROOT}/${rel}`;
    const frame = (id: number, functionName: string, url: string, children: number[] = []) => ({ id, callFrame: { functionName, url, lineNumber: 0 }, children });
    const profile = {
      startTime: 0,
      endTime: 10_000,
      nodes: [
        frame(1, '(root)', '', [2, 5, 7, 8]),
        frame(2, 'readNew', file('src/events/relay.ts'), [3]),
        frame(3, 'appendCall', file('src/events/eventLog.ts'), [4]),
        frame(4, 'evalsha', file('node_modules/ioredis/built/Redis.js')),
        frame(5, 'parseReply', file('node_modules/ioredis/built/DataHandler.js')),
        frame(7, '(garbage collector)', ''),
        frame(8, '(idle)', ''),
      ],
      // 4 samples in ioredis under eventLog (event-log append), 2 in relay.ts, 1 in ioredis alone, 1 GC, 2 idle.
      samples: [4, 4, 4, 4, 2, 2, 5, 7, 8, 8],
      timeDeltas: Array(10).fill(1000),
    };
    const dir = mkdtempSync(join(tmpdir(), 'profile-'));
    try {
      writeFileSync(join(dir, 'p.cpuprofile'), JSON.stringify(profile));
      const s = summariseProfile(join(dir, 'p.cpuprofile'));
      expect(s.busyMs).toBe(8);
      expect(Object.fromEntries(s.byStage.map((x) => [x.stage, x.ms]))).toEqual({
        'event-log append': 4,
        'relay read': 2,
        'no project frame: ioredis': 1,
        'no project frame: (garbage collector)': 1,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names the stages by folder and file', () => {
    expect(stageOf('src/http/router.ts')).toBe('HTTP parse, auth and response');
    expect(stageOf('src/calls/store.ts')).toBe('script call');
    expect(stageOf('src/gateway/gateway.ts')).toBe('live publish (gateway)');
    expect(stageOf('src/webhooks/publisher.ts')).toBe('webhook enqueue and delivery');
    expect(stageOf('src/util/logger.ts')).toBe('other project code');
    expect(stageOf('bench/run.ts')).toBeUndefined();
  });
});

describe('comparing two builds', () => {
  it('gives the median and the spread of the runs', () => {
    expect(spreadOf([3, 1, 2])).toEqual({ median: 2, min: 1, max: 3, relative: 1 });
    expect(spreadOf([4, 1, 2, 3]).median).toBe(2.5);
  });

  it('concludes only when the runs do not overlap', () => {
    expect(verdict(spreadOf([1, 2, 3]), spreadOf([4, 5, 6]))).toBe('lower');
    expect(verdict(spreadOf([4, 5, 6]), spreadOf([1, 2, 3]))).toBe('higher');
    expect(verdict(spreadOf([1, 2, 5]), spreadOf([4, 5, 6]))).toBe('inconclusive');
  });
});
