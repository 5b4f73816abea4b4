import { describe, expect, it } from 'vitest';
import { missedCallPushesFor, pushesFor, usersToLookUp, SIGNAL_TTL_MS } from '../../src/push/planner.js';
import type { CallChange } from '../../src/calls/change.js';
import type { PairCall } from '../../src/calls/model.js';
import type { PushRegistration } from '../../src/push/registry.js';
import { registration, ringingCall } from '../support/callRecords.js';

const call = ringingCall({ callId: 'c:1', video: true, createdAtMs: 1000, expiresAtMs: 46_000 });
const reg = registration;
const regs: Record<string, PushRegistration[]> = {
  bob: [reg('bob', 'bob-iphone', 'iosVoip'), reg('bob', 'bob-pixel', 'androidPush'), reg('bob', 'bob-tab', 'androidPush')],
  alice: [reg('alice', 'alice-phone', 'androidPush'), reg('alice', 'alice-ipad', 'iosVoip')],
};
const all = { iosVoip: true, androidPush: true };
const plan = (c: CallChange, enabled = all) => pushesFor(c, (u) => regs[u] ?? [], enabled);
const at = (kind: CallChange['kind'], patch: Partial<Omit<PairCall, 'kind'>>): CallChange => ({ entryId: '1-0', shard: 0, kind, atMs: 5000, call: { ...call, ...patch } });

describe('push planner (docs/protocol.md "Push formats")', () => {
  it('created: one invitation per callee installation, both platforms, deterministic IDs without ":"', () => {
    const p = plan(at('created', {}));
    expect(p.map((j) => `${j.data.t}:${j.data.installationId}:${j.data.kind}`)).toEqual([
      'invite:bob-iphone:iosVoip',
      'invite:bob-pixel:androidPush',
      'invite:bob-tab:androidPush',
    ]);
    for (const j of p) expect(j.id).not.toContain(':');
    expect(plan(at('created', {})).map((j) => j.id)).toEqual(p.map((j) => j.id));
  });

  it('a callee the call policy screened (docs/call-policy.md) is never pushed, nor its registrations read', () => {
    for (const screened of ['blocked', 'notAllowed'] as const) {
      for (const c of [at('created', { screened }), at('ended', { screened, state: 'ended', revision: '2', endReason: 'unanswered', endedBy: 'system', endedAtMs: 46_000 })]) {
        expect(usersToLookUp(c)).toEqual([]);
        expect(plan(c)).toEqual([]);
      }
    }
  });

  it('an unconfigured platform gets no jobs', () => {
    expect(plan(at('created', {}), { iosVoip: false, androidPush: true }).every((j) => j.data.kind === 'androidPush')).toBe(true);
    expect(plan(at('created', {}), { iosVoip: false, androidPush: false })).toEqual([]);
  });

  it('answered: answeredElsewhere signals to the other callee Android devices, call.accepted to the caller’s Android devices, nothing to iOS', () => {
    const p = plan(at('answered', { state: 'accepted', revision: '2', answeredByInstallationId: 'bob-pixel', acceptedAtMs: 4000 }));
    const summary = p.map((j) => (j.data.t === 'signal' ? `${j.data.installationId}:${j.data.payload.type}` : 'invite'));
    expect(summary).toEqual(['alice-phone:call.accepted', 'bob-tab:call.ended']);
    for (const j of p) {
      expect(j.data.kind).toBe('androidPush');
      if (j.data.t === 'signal') expect(j.data.deadlineMs).toBe(5000 + SIGNAL_TTL_MS);
    }
  });

  it('caller cancel: callerCancelled to every callee Android device', () => {
    const p = plan(at('ended', { state: 'ended', revision: '2', endReason: 'localHangup', endedBy: 'caller', endedByInstallationId: 'alice-phone' }));
    expect(p.map((j) => (j.data.t === 'signal' ? `${j.data.installationId}:${(j.data.payload as { reason: string }).reason}` : '?'))).toEqual([
      'bob-pixel:callerCancelled',
      'bob-tab:callerCancelled',
    ]);
  });

  it('hang-up after answer sends no push at all', () => {
    const c = at('ended', { state: 'ended', revision: '3', answeredByInstallationId: 'bob-pixel', acceptedAtMs: 4000, endReason: 'localHangup', endedBy: 'caller' });
    expect(usersToLookUp(c)).toEqual([]);
    expect(plan(c)).toEqual([]);
  });
});

describe('missed-call alerts (docs/protocol.md "Missed-call alerts")', () => {
  const alerting = { ios: true, android: true, lifetimeMs: 86_400_000, locKey: 'MISSED_CALL' };
  const withAlert: Record<string, PushRegistration[]> = { ...regs, bob: [...regs.bob!, reg('bob', 'bob-iphone', 'iosAlert')] };
  const planMissed = (c: CallChange, alerts: typeof alerting | undefined = alerting) => missedCallPushesFor(c, (u) => withAlert[u] ?? [], () => alerts);
  const ended = (patch: Partial<Omit<PairCall, 'kind'>>) => at('ended', { state: 'ended', revision: '2', endedAtMs: 5000, ...patch });

  it('a callee who missed the call: one alert per iosAlert and Android registration, none to the VoIP token, one id per call, installation and kind', () => {
    for (const c of [ended({ endReason: 'unanswered', endedBy: 'system' }), ended({ endReason: 'localHangup', endedBy: 'caller' })]) {
      const p = planMissed(c);
      expect(p.map((j) => `${j.data.installationId}:${j.data.kind}`)).toEqual(['bob-pixel:androidPush', 'bob-tab:androidPush', 'bob-iphone:iosAlert']);
      for (const j of p) {
        expect(j.data).toMatchObject({ t: 'missed', callId: 'c:1', userId: 'bob', deadlineMs: 5000 + 86_400_000 });
        expect(j.id).toBe(`missed.c%3A1.${j.data.installationId}.${j.data.kind}`);
      }
      expect(p[0]!.data.t === 'missed' && p[0]!.data.payload).toMatchObject({ type: 'call.missed', eventId: 'c:1:2:missed.bob', userId: 'bob', callerUserId: call.callerUserId });
    }
  });

  it('none for an answered, declined or busy call, nor for a screened callee', () => {
    expect(planMissed(ended({ endReason: 'localHangup', endedBy: 'caller', answeredByInstallationId: 'bob-pixel', acceptedAtMs: 4000 }))).toEqual([]);
    expect(planMissed(ended({ endReason: 'declined', endedBy: 'callee', endedByInstallationId: 'bob-pixel' }))).toEqual([]);
    expect(planMissed(ended({ endReason: 'busy', endedBy: 'callee', endedByInstallationId: 'bob-pixel' }))).toEqual([]);
    expect(planMissed(ended({ endReason: 'unanswered', endedBy: 'system', screened: 'blocked' }))).toEqual([]);
  });

  it("as the app allows: a platform turned off gets none, an app without alerts none", () => {
    const c = ended({ endReason: 'unanswered', endedBy: 'system' });
    expect(planMissed(c, { ...alerting, android: false }).map((j) => j.data.kind)).toEqual(['iosAlert']);
    expect(planMissed(c, { ...alerting, ios: false }).map((j) => j.data.kind)).toEqual(['androidPush', 'androidPush']);
    expect(missedCallPushesFor(c, (u) => withAlert[u] ?? [], () => undefined)).toEqual([]);
  });
});
