/**
 * What one group call of the bench's `group` scenario does and which events each installation
 * must receive at each phase, from the audience rules of docs/group-calls.md "Who receives what".
 * The generator (workers/group.ts) awaits exactly these events and counts any other as an
 * anomaly; the report's cost per member divides a group call's cost by its members.
 */

export interface GroupMember {
  userId: string;
  /** Its installations; the first is the one that joins or declines. */
  installations: string[];
}

export interface GroupPlan {
  callerUserId: string;
  callerInstallation: string;
  members: GroupMember[];
  /** Members 0 … joins−1 join, one after the other (at least one: the call must be accepted to end for all). */
  joins: number;
  /** The member after the joiners declines (0 or 1); the rest ring until the caller ends the call for all. */
  declines: number;
}

/** One event an installation must receive, and the histogram its latency from the phase's action goes to. */
export interface ExpectedEvent {
  installationId: string;
  key: string;
  measure: string;
}

/**
 * A step of the call: `invite` is the create (its latencies run from the scheduled start); each
 * other phase is one request by `actor` (a member's index, or -1 for the caller).
 */
export interface GroupPhase {
  kind: 'invite' | 'join' | 'decline' | 'end';
  actor: number;
  expect: ExpectedEvent[];
}

/** The fields of an event that tell expected events apart (docs/group-calls.md "Events"). */
export interface EventFields {
  type: string;
  userId?: string;
  state?: string;
  reason?: string;
}

/** An event's identity within one call at one installation. */
export function eventKey(ev: EventFields): string {
  if (ev.type === 'call.participant') return `call.participant ${ev.userId ?? ''} ${ev.state ?? ''}`;
  if (ev.type === 'call.ended') return `call.ended ${ev.reason ?? ''}`;
  return ev.type;
}

export const MEASURE = {
  invite: 'invite (ws)',
  participantJoined: 'join → call.participant (ws)',
  elsewhere: 'join → answeredElsewhere (ws)',
  participantDeclined: 'decline → call.participant (ws)',
  declinedElsewhere: 'decline → call.ended declined (ws)',
  ended: 'end for all → call.ended (ws)',
} as const;

/**
 * The phases of one group call in order: the create rings every installation of every member;
 * each joiner's other installations stop ringing and every participant already in the call
 * (the caller first) is told; the decliner's other installations stop ringing and the
 * participants are told; the caller's end for all reaches each joiner's joined installation and
 * every installation of the members still ringing, all with `remoteEnded` (the end came after a
 * join), and never the caller's own installation.
 */
export function groupPhases(plan: GroupPlan): GroupPhase[] {
  const { members, joins, declines } = plan;
  if (joins < 1 || joins + declines > members.length) throw new Error(`group plan: ${joins} joins and ${declines} declines among ${members.length} members`);
  const each = (m: GroupMember, from: number, key: string, measure: string) => m.installations.slice(from).map((installationId) => ({ installationId, key, measure }));
  /** The participants in the call before member j acts: the caller and the earlier joiners, on their joined installations. */
  const inCall = (j: number) => [plan.callerInstallation, ...members.slice(0, Math.min(j, joins)).map((m) => m.installations[0]!)];
  const phases: GroupPhase[] = [{ kind: 'invite', actor: -1, expect: members.flatMap((m) => each(m, 0, 'call.invited', MEASURE.invite)) }];
  /** What a member's join or decline tells its other installations (they stop ringing) and the participants in the call. */
  const told = {
    join: { reason: 'answeredElsewhere', state: 'joined', elsewhere: MEASURE.elsewhere, participants: MEASURE.participantJoined },
    decline: { reason: 'declined', state: 'declined', elsewhere: MEASURE.declinedElsewhere, participants: MEASURE.participantDeclined },
  } as const;
  for (let j = 0; j < joins + declines; j++) {
    const m = members[j]!;
    const kind = j < joins ? 'join' : 'decline';
    const t = told[kind];
    phases.push({
      kind,
      actor: j,
      expect: [
        ...each(m, 1, eventKey({ type: 'call.ended', reason: t.reason }), t.elsewhere),
        ...inCall(j).map((installationId) => ({ installationId, key: eventKey({ type: 'call.participant', userId: m.userId, state: t.state }), measure: t.participants })),
      ],
    });
  }
  const ended = eventKey({ type: 'call.ended', reason: 'remoteEnded' });
  phases.push({
    kind: 'end',
    actor: -1,
    expect: [
      ...members.slice(0, joins).map((m) => ({ installationId: m.installations[0]!, key: ended, measure: MEASURE.ended })),
      ...members.slice(joins + declines).flatMap((m) => each(m, 0, ended, MEASURE.ended)),
    ],
  });
  return phases;
}

/** A cost of one call: CPU ms by process, Redis commands and round trips. */
export interface CallCost {
  cpuMsPerLifecycle: Record<string, number>;
  redisCallsPerLifecycle: number;
  redisRoundTripsPerLifecycle: number;
}

/** The deployment's cost a second at rest, sockets connected and no calls (scenarios/callSteps.ts RestCost). */
export interface FixedCost {
  cpuMsPerSecond: Record<string, number>;
  commandsPerSecond: number;
  roundTripsPerSecond: number;
}

/**
 * What a call cost without the deployment's fixed cost, which every per-call figure of a step
 * carries divided by the step's rate (so a step at a low rate seems to cost more a call); never
 * below zero.
 */
export function netOfRest(cost: CallCost, rest: FixedCost, rate: number): CallCost {
  const less = (n: number, perSecond: number) => Math.max(0, n - perSecond / rate);
  return {
    cpuMsPerLifecycle: Object.fromEntries(Object.entries(cost.cpuMsPerLifecycle).map(([k, ms]) => [k, less(ms, rest.cpuMsPerSecond[k] ?? 0)])),
    redisCallsPerLifecycle: less(cost.redisCallsPerLifecycle, rest.commandsPerSecond),
    redisRoundTripsPerLifecycle: less(cost.redisRoundTripsPerLifecycle, rest.roundTripsPerSecond),
  };
}

export interface PerMemberRow {
  metric: string;
  perCall: number;
  perMember: number;
  oneToOne: number;
  /** perMember ÷ oneToOne. */
  ratio: number;
  met: boolean;
}

/** The processes whose CPU counts as the deployment's (server roles and Redis; not the generators or the fake providers). */
export const DEPLOYMENT_PROCESSES = ['server', 'server worker', 'redis'] as const;

/**
 * A group call's cost per member against a one-to-one lifecycle's (the target: at most
 * `maxRatio` of it, because a group shares the call's work): Redis commands, Redis round trips,
 * and the CPU of the server processes and Redis together.
 */
export function perMemberCost(group: CallCost, members: number, oneToOne: CallCost, maxRatio = 0.5): PerMemberRow[] {
  const cpu = (c: CallCost) => DEPLOYMENT_PROCESSES.reduce((sum, p) => sum + (c.cpuMsPerLifecycle[p] ?? 0), 0);
  const row = (metric: string, perCall: number, one: number): PerMemberRow => {
    const perMember = perCall / members;
    const ratio = one > 0 ? perMember / one : NaN;
    return { metric, perCall, perMember, oneToOne: one, ratio, met: Number.isFinite(ratio) && ratio <= maxRatio };
  };
  return [
    row('Redis commands', group.redisCallsPerLifecycle, oneToOne.redisCallsPerLifecycle),
    row('Redis round trips', group.redisRoundTripsPerLifecycle, oneToOne.redisRoundTripsPerLifecycle),
    row('CPU ms (server processes and Redis)', cpu(group), cpu(oneToOne)),
  ];
}
