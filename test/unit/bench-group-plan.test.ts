import { describe, expect, it } from 'vitest';
import { chartsOf, type RunResults } from '../../bench/lib/htmlReport.js';
import { eventKey, groupPhases, MEASURE, netOfRest, perMemberCost, type GroupPlan } from '../../bench/lib/groupPlan.js';

/**
 * The bench's group scenario (bench/README.md, `group`): which events each installation must get
 * at each phase of a group call (docs/group-calls.md "Who receives what"), a member's share of a
 * call's cost against a one-to-one lifecycle's, and its charts.
 */

const plan = (members: number, joins: number, declines: number): GroupPlan => ({
  callerUserId: 'a',
  callerInstallation: 'a-phone',
  members: Array.from({ length: members }, (_, m) => ({ userId: `m${m}`, installations: [`m${m}-d0`, `m${m}-d1`] })),
  joins,
  declines,
});

/** A phase's expected events as `installation key` lines, sorted. */
const lines = (p: { expect: { installationId: string; key: string }[] }) => p.expect.map((e) => `${e.installationId} ${e.key}`).sort();

describe('bench group plan: expected events', () => {
  it('keys events by what tells them apart', () => {
    expect(eventKey({ type: 'call.invited' })).toBe('call.invited');
    expect(eventKey({ type: 'call.participant', userId: 'm1', state: 'joined' })).toBe('call.participant m1 joined');
    expect(eventKey({ type: 'call.ended', reason: 'remoteEnded' })).toBe('call.ended remoteEnded');
  });

  it('rings every installation, tells the participants already in the call of each join and the decline, and ends for all but the caller', () => {
    const phases = groupPhases(plan(4, 2, 1));
    expect(phases.map((p) => `${p.kind} ${p.actor}`)).toEqual(['invite -1', 'join 0', 'join 1', 'decline 2', 'end -1']);
    expect(lines(phases[0]!)).toEqual(['m0-d0', 'm0-d1', 'm1-d0', 'm1-d1', 'm2-d0', 'm2-d1', 'm3-d0', 'm3-d1'].map((i) => `${i} call.invited`));
    // The first joiner: only the caller is in the call; the joiner's other phone stops ringing.
    expect(lines(phases[1]!)).toEqual(['a-phone call.participant m0 joined', 'm0-d1 call.ended answeredElsewhere']);
    // The second: the caller and the first joiner's joined phone.
    expect(lines(phases[2]!)).toEqual(['a-phone call.participant m1 joined', 'm0-d0 call.participant m1 joined', 'm1-d1 call.ended answeredElsewhere']);
    expect(lines(phases[3]!)).toEqual([
      'a-phone call.participant m2 declined',
      'm0-d0 call.participant m2 declined',
      'm1-d0 call.participant m2 declined',
      'm2-d1 call.ended declined',
    ]);
    // The joiners on their joined phone, the member still ringing on both; not the caller, not the decliner.
    expect(lines(phases[4]!)).toEqual(['m0-d0', 'm1-d0', 'm3-d0', 'm3-d1'].map((i) => `${i} call.ended remoteEnded`));
    expect(phases[2]!.expect.find((e) => e.installationId === 'a-phone')!.measure).toBe(MEASURE.participantJoined);
  });

  it("the issue's shape: 8 members × 2, 3 joins and a decline expect 16 invitations, 6 + 3 join events, 4 + 1 decline events and 11 ends", () => {
    const phases = groupPhases(plan(8, 3, 1));
    expect(phases.map((p) => p.expect.length)).toEqual([16, 2, 3, 4, 5, 11]);
  });

  it('refuses a plan nobody joins (the caller could not end it for all) or with more actors than members', () => {
    expect(() => groupPhases(plan(3, 0, 1))).toThrow(/0 joins/);
    expect(() => groupPhases(plan(3, 3, 1))).toThrow(/among 3 members/);
  });
});

describe('bench group plan: cost per member', () => {
  const oneToOne = { cpuMsPerLifecycle: { server: 1, 'server worker': 0.6, redis: 0.4, 'generator 0': 5, 'push fakes': 3 }, redisCallsPerLifecycle: 40, redisRoundTripsPerLifecycle: 4 };

  it("divides a call's cost by its members and compares it with a one-to-one lifecycle's, counting the server processes and Redis only", () => {
    const group = { cpuMsPerLifecycle: { server: 4, 'server worker': 3, redis: 1, 'generator 0': 50 }, redisCallsPerLifecycle: 320, redisRoundTripsPerLifecycle: 12 };
    const rows = perMemberCost(group, 8, oneToOne);
    expect(rows.map((r) => [r.metric, r.perCall, r.perMember, r.oneToOne, r.ratio, r.met])).toEqual([
      ['Redis commands', 320, 40, 40, 1, false],
      ['Redis round trips', 12, 1.5, 4, 0.375, true],
      ['CPU ms (server processes and Redis)', 8, 1, 2, 0.5, true],
    ]);
  });

  it('misses when the one-to-one figure is zero or absent (no ratio to compare)', () => {
    const rows = perMemberCost({ cpuMsPerLifecycle: {}, redisCallsPerLifecycle: 8, redisRoundTripsPerLifecycle: 0 }, 8, { ...oneToOne, redisCallsPerLifecycle: 0 });
    expect(rows[0]!.met).toBe(false);
    expect(Number.isNaN(rows[0]!.ratio)).toBe(true);
  });
});

describe('bench group plan: cost without the fixed cost', () => {
  it("takes the deployment's cost a second at rest, divided by the run's rate, off each figure, never below zero", () => {
    const cost = { cpuMsPerLifecycle: { server: 3, redis: 0.5, 'generator 0': 2 }, redisCallsPerLifecycle: 120, redisRoundTripsPerLifecycle: 16 };
    const rest = { cpuMsPerSecond: { server: 20, redis: 10 }, commandsPerSecond: 128, roundTripsPerSecond: 22 };
    expect(netOfRest(cost, rest, 10)).toEqual({
      cpuMsPerLifecycle: { server: 1, redis: 0, 'generator 0': 2 },
      redisCallsPerLifecycle: 120 - 12.8,
      redisRoundTripsPerLifecycle: 16 - 2.2,
    });
  });
});

describe('bench HTML report: group charts', () => {
  it('draws fan-out and join p99 per step (not the warm-up) and the cost ratios', () => {
    const summary = (p99: number) => ({ count: 1, p50: p99 / 2, p95: p99, p99, max: p99 });
    const step = (label: string, targetRate: number, pass: boolean, fanout: number, join: number) => ({
      label,
      targetRate,
      achievedRate: targetRate,
      pass,
      latency: { 'invite fan-out, last socket (ws)': summary(fanout), 'join → call.participant (ws)': summary(join) },
    });
    const data = {
      steps: [step('warm-up', 5, true, 1, 1), step('search 1', 20, true, 6, 3), step('search 2', 30, false, 80, 40)],
      perMember: [{ metric: 'Redis commands', ratio: 0.9 }],
    };
    const run: RunResults = { meta: {} as RunResults['meta'], results: [{ id: 'group', title: 'group', data }] };
    const [latency, cost] = chartsOf(run);
    expect(latency!.labels).toEqual(['search 1 20/s', 'search 2 30/s (failed)']);
    expect(latency!.datasets.map((d) => d.data)).toEqual([[6, 80], [3, 40]]);
    expect(cost!.datasets[0]!.data).toEqual([0.9]);
  });
});
