import { randomUUID } from 'node:crypto';
import type { EventPayload } from '../../src/events/payloads.js';
import { CallGenerator, type CallsRun } from '../lib/callGenerator.js';
import { nowMs } from '../lib/clock.js';
import { eventKey, groupPhases, type ExpectedEvent, type GroupPhase } from '../lib/groupPlan.js';
import type { HistogramSet } from '../lib/histogram.js';
import type { PushApps } from '../lib/pushDevices.js';
import { InFlight } from '../lib/lifecycleRun.js';
import { device, type Device } from '../lib/users.js';
import { BenchFailure, countInto, Waiter } from '../lib/waiter.js';
import type { Task } from './task.js';

/**
 * Group call lifecycles, open loop (docs/group-calls.md), each from a caller to `members` members
 * with `installations` installations each, every installation with its signaling socket:
 *   create (caller, HTTP, `calleeUserIds`) → `call.invited` on every member's every socket (and
 *   a push at the fake providers for each, when push is set up) → `joins` members join one after
 *   the other (POST answer from their first installation): their other installations get
 *   `call.ended answeredElsewhere`, every participant already in the call `call.participant`
 *   → the next member declines (POST end `declined`): its other installation stops ringing, the
 *   participants are told → the caller ends the call for all (`forAll`): the joiners and every
 *   installation still ringing get `call.ended remoteEnded`.
 * The events each installation must get at each phase come from bench/lib/groupPlan.ts; any
 * other is counted as an anomaly. Results have the calls generator's shape, so a step of them
 * is measured like a one-to-one step (scenarios/callSteps.ts runCallStep).
 */

export interface GroupSetup {
  baseUrl: string;
  wsBase: string;
  secret: string;
  tag: string;
  gen: number;
  /** Groups of users this generator holds (each group in at most one call at a time). */
  groups: number;
  members: number;
  installations: number;
  joins: number;
  declines: number;
  push?: PushApps;
}

/** The histograms a group step reports, in this order (push legs are added by the fakes). */
export const GROUP_STEP_ORDER = [
  'create',
  'invite (ws)',
  'invite fan-out, last socket (ws)',
  'push: APNs invite',
  'push: FCM invite',
  'join',
  'join → call.participant (ws)',
  'join → answeredElsewhere (ws)',
  'decline',
  'decline → call.participant (ws)',
  'decline → call.ended declined (ws)',
  'end for all',
  'end for all → call.ended (ws)',
  'end for all → call.ended, last socket (ws)',
  'lifecycle',
];

interface Group {
  caller: Device;
  members: Device[][];
  calleeUserIds: string[];
  phases: GroupPhase[];
}

/** The in-flight state of one group call: a slot per expected event, and per installation for its push. */
class GroupCallState {
  readonly events = new Map<string, Waiter>();
  readonly pushed = new Map<string, Waiter>();
  constructor(
    readonly callId: string,
    readonly startedAt: number,
    phases: readonly GroupPhase[],
    pushInstallations: readonly string[],
  ) {
    for (const p of phases) for (const e of p.expect) this.events.set(slot(e.installationId, e.key), new Waiter());
    for (const i of pushInstallations) this.pushed.set(i, new Waiter());
  }
  wait(e: ExpectedEvent): Promise<number> {
    return this.events.get(slot(e.installationId, e.key))!.wait();
  }
  failAll(err: Error): void {
    for (const w of [...this.events.values(), ...this.pushed.values()]) w.fail(err);
  }
  /** Fails every awaited event that has not arrived, naming it. */
  fail(timeoutMs: number): void {
    for (const [k, w] of this.events) w.fail(new BenchFailure(`timeout: no ${k.slice(k.indexOf(' ') + 1)} within ${timeoutMs} ms`));
    for (const w of this.pushed.values()) w.fail(new BenchFailure(`timeout: no push at the fake provider within ${timeoutMs} ms`));
  }
}

const slot = (installationId: string, key: string) => `${installationId} ${key}`;

export function createTask(): Task {
  let s: GroupSetup;
  const groups: Group[] = [];
  // A group rests between calls as a one-to-one pair does, so its joiners' busy markers are gone.
  const gen = new CallGenerator(groups, 'generator: group reused without rest (raise group.groupsPerGenerator)');
  const active = new InFlight<GroupCallState>();
  const callerInstallations = new Set<string>();

  const onEvent = (installationId: string) => (ev: EventPayload, at: number) => {
    const st = active.get(ev.callId);
    const role = callerInstallations.has(installationId) ? 'caller' : 'member';
    if (!st) return countInto(gen.anomalies, `${role}:${ev.type}:unknown-call`);
    const key = eventKey(ev as { type: string; userId?: string; state?: string; reason?: string });
    const w = st.events.get(slot(installationId, key));
    // The caller is never told of its own end: a call.ended there ended the call on the server's side.
    if (!w && role === 'caller' && ev.type === 'call.ended') return st.failAll(new BenchFailure(`caller got ${key}`));
    if (!w) return countInto(gen.anomalies, `${role}:${key}:unexpected`);
    if (!w.fire(at)) countInto(gen.anomalies, `${role}:${key}:duplicate`);
  };

  /** One request of a phase: a member's join or decline, or the caller's end for all. */
  const act = async (hist: HistogramSet, g: Group, phase: GroupPhase, callId: string): Promise<number> => {
    const d = phase.actor < 0 ? g.caller : g.members[phase.actor]![0]!;
    const operationId = randomUUID();
    const [path, body, name] =
      phase.kind === 'join'
        ? (['answer', { installationId: d.installationId, operationId }, 'join'] as const)
        : phase.kind === 'decline'
          ? (['end', { reason: 'declined', operationId }, 'decline'] as const)
          : (['end', { reason: 'localHangup', forAll: true, operationId }, 'end for all'] as const);
    const t0 = nowMs();
    const res = await gen.http.post(`/v1/calls/${callId}/${path}`, d.token, body);
    if (phase.kind === 'join') countInto(gen.answers, String(res.status));
    if (res.status !== 200) throw new BenchFailure(`${name}: HTTP ${res.status}`);
    hist.get(name).recordMs(nowMs() - t0);
    return t0;
  };

  return {
    async setup(raw) {
      s = raw as GroupSetup;
      for (let g = 0; g < s.groups; g++) {
        const base = `${s.tag}-g${s.gen}-grp${g}`;
        const caller = device(s.secret, `${base}-caller`, `${base}-caller-phone`, 'Bench Group Caller');
        const members = Array.from({ length: s.members }, (_, m) =>
          Array.from({ length: s.installations }, (_, k) => device(s.secret, `${base}-m${m}`, `${base}-m${m}-d${k}`)),
        );
        const phases = groupPhases({
          callerUserId: caller.userId,
          callerInstallation: caller.installationId,
          members: members.map((ds) => ({ userId: ds[0]!.userId, installations: ds.map((d) => d.installationId) })),
          joins: s.joins,
          declines: s.declines,
        });
        groups.push({ caller, members, calleeUserIds: members.map((ds) => ds[0]!.userId), phases });
        callerInstallations.add(caller.installationId);
      }
      const owners = groups.flatMap((g) => [g.caller, ...g.members.flat()]).map((d) => ({ d, onEvent: onEvent(d.installationId) }));
      const regs = groups.flatMap((g, gi) => g.members.flatMap((ds, m) => ds.map((d, k) => ({ d, ios: (gi + m + k) % 2 === 0 }))));
      return gen.connect(s, owners, regs, {
        inFlight: (callId) => active.get(callId) !== undefined,
        invited: (callId, d) => active.get(callId)!.pushed.get(d.installationId)?.fire(nowMs()) === true,
      });
    },

    run: (raw, progress) =>
      gen.run(raw as CallsRun, progress, active, async (g, seq, sched, { hist }) => {
        const callId = gen.callId(seq, sched);
        const st = new GroupCallState(callId, sched, g.phases, s.push ? g.members.flat().map((d) => d.installationId) : []);
        await active.during(callId, st, async () => {
          await gen.create(hist, g.caller.token, sched, { callId, calleeUserIds: g.calleeUserIds });
          for (const phase of g.phases) {
            // The invitations are timed from the scheduled start; every other phase from its request.
            const t0 = phase.kind === 'invite' ? sched : await act(hist, g, phase, callId);
            let last = t0;
            for (const e of phase.expect) {
              const at = await st.wait(e);
              hist.get(e.measure).recordMs(at - t0);
              last = Math.max(last, at);
            }
            if (phase.kind === 'invite') {
              hist.get('invite fan-out, last socket (ws)').recordMs(last - t0);
              // Every member's phones ring once their push arrived too (its latency is timed by the
              // fakes), so no push is skipped as already answered and each call costs the same.
              await Promise.all([...st.pushed.values()].map((w) => w.wait()));
            }
            if (phase.kind === 'end') hist.get('end for all → call.ended, last socket (ws)').recordMs(last - t0);
          }
        }, () => gen.http.post(`/v1/calls/${callId}/end`, g.caller.token, { reason: 'localHangup', forAll: true, operationId: randomUUID() }));
      }),

    teardown: () => gen.close(),
  };
}
