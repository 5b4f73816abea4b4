import { inSpan, SpanKind, tracingEnabled } from '../observability/tracing.js';
import type { Queue } from 'bullmq';
import type { CallRecord } from '../calls/model.js';
import { invitationPayload } from '../events/payloads.js';
import { participantOf } from '../calls/participants.js';
import { partitionOfShard, type Partitioning } from '../redis/partitions.js';
import { shardOf } from '../redis/keys.js';
import { tokenHash, type PushRegistry, type PushRegistration, type TokenRemoval } from './registry.js';
import type { PushMessage, PushRetryJob } from './queues.js';
import type { SendResult } from './sendResult.js';
import type { Logger } from '../util/logger.js';
import type { MissedCallAlerts } from '../config/pushApps.js';
import type { MissedCallAlert } from './apns.js';
import type { AlertMark } from './missedCallSeen.js';

/**
 * Sends one attempt of a set of push messages (docs/architecture.md "Push"). Right before it sends, it checks
 * what must not ring: an invitation goes out only while its call is ringing with at least a second
 * left; a signal only before its deadline. Provider acceptance is counted as `accepted`, never as
 * delivered. Transient failures are retried as one delayed BullMQ job per partition (see
 * queues.ts), with exponential backoff and jitter, never before the provider's retry-after, and
 * never past the message's deadline. A token the provider reports invalid is removed, unless the
 * installation registered again after the send (compare-and-clear).
 */

export interface VoipSender {
  sendVoip(reg: { token: string; environment: 'production' | 'development' }, callpayload: object): Promise<SendResult>;
  /** Missed-call alerts to `iosAlert` tokens (docs/protocol.md "Missed-call alerts"). */
  sendAlert?(reg: { token: string; environment: 'production' | 'development' }, alert: MissedCallAlert): Promise<SendResult>;
}
export interface AndroidSender {
  send(token: string, opts: { priority: 'HIGH' | 'NORMAL'; ttlSeconds: number; callpayload: object; collapseKey?: string }): Promise<SendResult>;
}
/** The senders of one app (docs/push-apps.md). */
export interface AppSenders {
  apns?: VoipSender | undefined;
  fcm?: AndroidSender | undefined;
  /** The app's missed-call alerts (PUSH_APPS `missedCallAlerts` over the MISSED_CALL_ALERT* defaults). */
  missedCallAlerts?: MissedCallAlerts | undefined;
}
export interface PushSenders extends AppSenders {
  /**
   * With PUSH_APPS: each app's senders by appId, used instead of `apns`/`fcm`; a registration's
   * own appId picks them (docs/push-apps.md).
   */
  apps?: ReadonlyMap<string, AppSenders>;
  close?: () => Promise<void>;
}

/** Push outcomes by provider and result, for metrics and tests. */
export type PushOutcomes = Map<string, number>;

/** Exponential backoff with jitter, at least the provider's retry-after. */
export function pushBackoffMs(attempt: number, retryAfterMs: number | undefined, random = Math.random, maxMs = 8_000): number {
  const base = Math.min(250 * 2 ** Math.max(0, Math.min(attempt, 40) - 1), maxMs);
  const jittered = base / 2 + random() * (base / 2);
  return Math.max(Math.round(jittered), retryAfterMs ?? 0);
}

/** What the sender already knows, so it need not read it again (the relay's first attempt). */
export interface Known {
  /** Registrations by registrationKey(). */
  registrations?: ReadonlyMap<string, PushRegistration>;
  /** Invited calls as read when their batch was relayed (undefined: gone). */
  calls?: ReadonlyMap<string, CallRecord | undefined>;
  /** The missed-call alerts' marks were read (sendFirst): none of them is `seen`. */
  marksRead?: boolean;
}

export const registrationKey = (userId: string, installationId: string, kind: string) => `${userId}\n${installationId}\n${kind}`;

export interface DispatcherDeps {
  registry: PushRegistry;
  peekCall: (callId: string) => Promise<CallRecord | undefined>;
  senders: PushSenders;
  retryQueues: readonly Queue<PushRetryJob>[];
  partitioning: Partitioning;
  logger: Logger;
  outcomes: PushOutcomes;
  /** Each provider round trip: provider, result (as in `outcomes`) and seconds (metrics). */
  observeSend?: (provider: 'apns' | 'fcm', result: string, seconds: number) => void;
  /** A provider refused an app's configuration (metrics): the app as configured, `default` for the single app. */
  observeMisconfigured?: (provider: 'apns' | 'fcm', app: string, reason: string) => void;
  /**
   * A registration about to be removed because its provider reported the token invalid (the
   * push.token_removed webhook, docs/webhooks.md), with the condition of its removal. Awaited
   * before the removal.
   */
  tokenRemoved?: (reg: PushRegistration, reason: string, removal: TokenRemoval) => Promise<void>;
  /**
   * Claims each missed-call alert once before its first attempt (src/push/missedCallClaims.ts):
   * false for one already claimed, which is not sent again (a change relayed again).
   */
  claimAlerts?: (msgs: readonly MissedMessage[]) => Promise<boolean[]>;
  /**
   * Each missed-call alert's installation by its marks (src/push/missedCallSeen.ts): one that
   * rang and saw the end on a socket (`seen`) is skipped, before its claim.
   */
  alertMarks?: (msgs: readonly MissedMessage[]) => Promise<AlertMark[]>;
  /**
   * MISSED_CALL_ALERT_GRACE_MS: how long the relay's missed-call alerts to an installation that
   * rang wait for their first attempt (a delayed job), so that its socket's mark can be written
   * first; 0 or left out, at once.
   */
  alertGraceMs?: number;
  /** A missed-call alert a provider accepted (the history's `missedCallAlert`, src/history/missedCallAlerts.ts). */
  alertSent?: (msg: MissedMessage) => Promise<void>;
  /** A missed-call alert's attempt or end (metrics): platform, and the result as in `outcomes`. */
  observeMissed?: (platform: 'ios' | 'android', result: string) => void;
}

type MissedMessage = Extract<PushMessage, { t: 'missed' }>;

/**
 * A missed-call alert may wait a day for a provider that is down: its retries back off further
 * than a ringing push's (whose whole life is the ring window).
 */
const ALERT_MAX_BACKOFF_MS = 300_000;

type Ready = { msg: PushMessage; reg: PushRegistration; payload: object; deadlineMs: number };

export class PushDispatcher {
  constructor(private readonly deps: DispatcherDeps) {}

  /**
   * The first attempt of a relayed change's messages (relayPushes.ts), at once; but a missed-call
   * alert to an installation that rang and whose socket has not been marked as having seen the
   * end yet waits MISSED_CALL_ALERT_GRACE_MS, in a delayed job of its call's partition that its
   * worker runs as the first attempt (`attempts` 0; a retry job has 1 or more). Meanwhile a
   * gateway that wrote the end to one of the installation's sockets marks it, and the alert is
   * skipped then (docs/protocol.md "Missed-call alerts"). An alert is not urgent; one to an
   * installation that never rang cannot be skipped and goes at once, one already seen is skipped
   * here. The job reads the registrations again.
   */
  async sendFirst(messages: readonly PushMessage[], known: Known = {}): Promise<void> {
    const graceMs = this.deps.alertGraceMs ?? 0;
    const alerts = messages.filter((m): m is MissedMessage => m.t === 'missed');
    if (graceMs <= 0 || alerts.length === 0 || !this.deps.alertMarks) return this.send(messages, 0, known);
    const marks = await this.deps.alertMarks(alerts);
    const markOf = new Map<PushMessage, AlertMark>(alerts.map((m, i) => [m, marks[i]!]));
    for (const m of alerts) if (markOf.get(m) === 'seen') this.countMissed(m, 'skipped-seen');
    const now = messages.filter((m) => m.t !== 'missed' || markOf.get(m) === 'unrung');
    const later = alerts.filter((m) => markOf.get(m) === 'rang');
    await Promise.all([this.send(now, 0, { ...known, marksRead: true }), this.enqueue(later, 0, graceMs)]);
  }

  /** One attempt of every message (`attempts` made before this one). */
  async send(messages: readonly PushMessage[], attempts: number, known: Known = {}): Promise<void> {
    if (messages.length === 0) return;
    const ready = await this.prepare(messages, known, attempts);
    // A registration updated after this moment is newer than the token we send to: it survives a
    // report that the token is invalid.
    const sentAtMs = Date.now();
    const results = await Promise.all(ready.map((r) => this.timed(r)));
    const retry: { r: Ready; retryAfterMs: number | undefined }[] = [];
    const removals: Promise<unknown>[] = [];
    /** The accepted missed-call alerts, one per member and call (a member's installations share its record). */
    const alerted = new Map<string, MissedMessage>();
    results.forEach((result, i) => {
      const r = ready[i]!;
      const provider = providerOf(r.msg);
      this.count(provider, resultLabel(result));
      if (r.msg.t === 'missed') {
        this.deps.observeMissed?.(platformOf(r.msg), resultLabel(result));
        if (result.ok) alerted.set(`${r.msg.userId}\n${r.msg.callId}`, r.msg);
      }
      if (result.ok) return;
      switch (result.kind) {
        case 'invalidToken':
          // APNs names when the token stopped working: a registration made after that survives.
          removals.push(this.removeInvalid(r, result.reason, Math.min(sentAtMs, result.invalidSinceMs ?? sentAtMs)));
          return;
        case 'retry':
          retry.push({ r, retryAfterMs: result.retryAfterMs });
          return;
        case 'misconfigured': {
          // Every push of this app fails until an operator fixes its credentials or project.
          const app = this.deps.senders.apps ? r.reg.appId : 'default';
          this.deps.observeMisconfigured?.(provider, app, result.reason);
          this.deps.logger.error({ provider, app, reason: result.reason, status: result.status }, "push provider refused the app's configuration");
          return;
        }
        case 'fatal':
          this.deps.logger.warn({ provider, installationId: r.reg.installationId, reason: result.reason, status: result.status }, 'push rejected');
      }
    });
    const notes = this.deps.alertSent ? [...alerted.values()].map((m) => this.deps.alertSent!(m)) : [];
    await Promise.all([...removals, ...notes, this.scheduleRetries(retry, attempts + 1)]);
  }

  /** Reads what is not known yet (one auto-pipelined round trip) and drops what must not go out. */
  private async prepare(messages: readonly PushMessage[], known: Known, attempts: number): Promise<Ready[]> {
    const regs = await Promise.all(
      messages.map((m) => {
        const key = registrationKey(m.userId, m.installationId, m.kind);
        return known.registrations?.has(key) ? known.registrations.get(key) : this.deps.registry.get(m.userId, m.installationId, m.kind);
      }),
    );
    const callIds = [...new Set(messages.filter((m) => m.t === 'invite' && !known.calls?.has(m.callId)).map((m) => m.callId))];
    const read = await Promise.all(callIds.map((id) => this.deps.peekCall(id)));
    const calls = new Map(known.calls ?? []);
    callIds.forEach((id, i) => calls.set(id, read[i]));

    const now = Date.now();
    const ready: Ready[] = [];
    messages.forEach((msg, i) => {
      const reg = regs[i];
      const skip = (why: string) => this.count(providerOf(msg), `skipped-${why}`);
      if (!reg) return skip('no-registration');
      if (msg.t === 'invite') {
        const call = calls.get(msg.callId);
        if (!call) return skip('call-gone');
        // Each invitee rings in its own window (a group call's also once the call is accepted).
        const invitee = participantOf(call, msg.userId);
        if (call.state === 'ended' || !(invitee?.state === 'invited' || invitee?.state === 'ringing')) return skip('not-ringing');
        const deadlineMs = invitee.ringUntilMs ?? call.expiresAtMs;
        if (deadlineMs - now < 1000) return skip('expired');
        ready.push({ msg, reg, payload: invitationPayload(call, now, invitee), deadlineMs });
      } else {
        if (msg.deadlineMs - now < 1000) return skip('expired');
        ready.push({ msg, reg, payload: msg.payload, deadlineMs: msg.deadlineMs });
      }
    });
    return attempts === 0 ? this.claimed(ready, known.marksRead === true) : ready;
  }

  /**
   * Before a missed-call alert's first attempt: drops those whose installation rang and saw the
   * end on a socket (`skipped-seen`, src/push/missedCallSeen.ts), then claims the others and drops
   * those already claimed (`skipped-repeat`: their first attempt was made by an earlier relay of
   * the change).
   */
  private async claimed(ready: Ready[], marksRead: boolean): Promise<Ready[]> {
    let alerts = ready.filter((r): r is Ready & { msg: MissedMessage } => r.msg.t === 'missed');
    if (alerts.length === 0) return ready;
    const dropped = new Set<Ready>();
    const drop = (rs: readonly (Ready & { msg: MissedMessage })[], result: string) => {
      for (const r of rs) {
        dropped.add(r);
        this.countMissed(r.msg, result);
      }
    };
    if (this.deps.alertMarks && !marksRead) {
      const marks = await this.deps.alertMarks(alerts.map((r) => r.msg));
      drop(alerts.filter((_, i) => marks[i] === 'seen'), 'skipped-seen');
      alerts = alerts.filter((_, i) => marks[i] !== 'seen');
    }
    if (alerts.length > 0 && this.deps.claimAlerts) {
      const won = await this.deps.claimAlerts(alerts.map((r) => r.msg));
      drop(alerts.filter((_, i) => !won[i]), 'skipped-repeat');
    }
    return dropped.size === 0 ? ready : ready.filter((r) => !dropped.has(r));
  }

  private timed(r: Ready): Promise<SendResult> {
    if (!r.msg.tp || !tracingEnabled()) return this.measured(r);
    const provider = providerOf(r.msg);
    return inSpan(`push ${provider}`, { kind: SpanKind.CLIENT, parent: r.msg.tp, attributes: { 'calling.call_id': r.msg.callId, 'calling.push': r.msg.t } }, async (span) => {
      const result = await this.measured(r);
      span?.setAttribute('calling.push_result', resultLabel(result));
      return result;
    });
  }

  private async measured(r: Ready): Promise<SendResult> {
    const observe = this.deps.observeSend;
    if (!observe) return this.sendOne(r);
    const started = performance.now();
    const result = await this.sendOne(r);
    observe(providerOf(r.msg), resultLabel(result), (performance.now() - started) / 1000);
    return result;
  }

  private sendOne(r: Ready): Promise<SendResult> {
    const all = this.deps.senders;
    // The registration carries its appId: picking the app's senders costs no Redis read.
    const senders = all.apps ? all.apps.get(r.reg.appId) : all;
    if (!senders) return Promise.resolve({ ok: false, kind: 'misconfigured', reason: 'app not configured' });
    const msLeft = r.deadlineMs - Date.now();
    if (r.msg.t === 'missed') return this.sendAlert(r.msg, r.reg, senders, msLeft);
    if (r.reg.kind === 'iosVoip') {
      if (!senders.apns) return Promise.resolve({ ok: false, kind: 'misconfigured', reason: 'iOS push not configured' });
      return senders.apns.sendVoip({ token: r.reg.token, environment: r.reg.iosEnvironment ?? 'production' }, r.payload);
    }
    if (!senders.fcm) return Promise.resolve({ ok: false, kind: 'misconfigured', reason: 'Android push not configured' });
    const priority = r.msg.t === 'invite' ? 'HIGH' : 'NORMAL';
    // Whole seconds left, never 0 (a zero-TTL message is dropped when the device is offline).
    return senders.fcm.send(r.reg.token, { priority, ttlSeconds: Math.max(1, Math.floor(msLeft / 1000)), callpayload: r.payload });
  }

  /** A missed-call alert: an APNs alert push to an iosAlert token, a NORMAL data message on Android (docs/protocol.md "Missed-call alerts"). */
  private sendAlert(msg: MissedMessage, reg: PushRegistration, senders: AppSenders, msLeft: number): Promise<SendResult> {
    const settings = senders.missedCallAlerts;
    if (msg.kind === 'iosAlert') {
      if (!senders.apns?.sendAlert || !settings) return Promise.resolve({ ok: false, kind: 'misconfigured', reason: 'iOS push not configured' });
      return senders.apns.sendAlert(
        { token: reg.token, environment: reg.iosEnvironment ?? 'production' },
        { payload: msg.payload, locKey: settings.locKey, expiresAtMs: msg.deadlineMs },
      );
    }
    if (!senders.fcm) return Promise.resolve({ ok: false, kind: 'misconfigured', reason: 'Android push not configured' });
    // NORMAL: it shows a notification, it need not wake the phone at once; the ttl keeps it for a phone that is off.
    return senders.fcm.send(reg.token, { priority: 'NORMAL', ttlSeconds: Math.max(1, Math.floor(msLeft / 1000)), callpayload: msg.payload, collapseKey: msg.callId });
  }

  private async removeInvalid(r: Ready, reason: string, notAfterMs: number): Promise<void> {
    // Remove it unless the installation registered again (or another token) since we sent. The
    // notice is queued first and carries the same condition: its delivery makes sure of the
    // removal, so a worker that dies between the two loses neither (docs/webhooks.md "Delivery").
    const removal: TokenRemoval = { userId: r.reg.userId, installationId: r.reg.installationId, kind: r.reg.kind, tokenHash: tokenHash(r.reg.token), notAfterMs };
    await this.deps.tokenRemoved?.(r.reg, reason, removal);
    const removed = await this.deps.registry.remove(removal.userId, removal.installationId, removal.kind, removal);
    this.deps.logger.info({ provider: providerOf(r.msg), installationId: r.reg.installationId, reason, removed }, 'push token reported invalid');
  }

  /** One delayed job per partition with the messages that failed transiently. */
  private async scheduleRetries(failed: { r: Ready; retryAfterMs: number | undefined }[], attempts: number): Promise<void> {
    if (failed.length === 0) return;
    // Missed-call alerts back off further than ringing pushes: their own jobs.
    const alerts = failed.filter((f) => f.r.msg.t === 'missed');
    const rest = failed.filter((f) => f.r.msg.t !== 'missed');
    await Promise.all([this.scheduleGroup(rest, attempts, undefined), this.scheduleGroup(alerts, attempts, ALERT_MAX_BACKOFF_MS)]);
  }

  private async scheduleGroup(failed: { r: Ready; retryAfterMs: number | undefined }[], attempts: number, maxBackoffMs: number | undefined): Promise<void> {
    if (failed.length === 0) return;
    const maxRetryAfter = Math.max(0, ...failed.map((f) => f.retryAfterMs ?? 0));
    const delayMs = pushBackoffMs(attempts, maxRetryAfter, Math.random, maxBackoffMs);
    const later: PushMessage[] = [];
    for (const { r } of failed) {
      if (Date.now() + delayMs >= r.deadlineMs - 1000) {
        this.count(providerOf(r.msg), 'gave-up');
        if (r.msg.t === 'missed') this.deps.observeMissed?.(platformOf(r.msg), 'gave-up');
        continue;
      }
      later.push(r.msg);
    }
    await this.enqueue(later, attempts, delayMs);
  }

  /** Delayed jobs of `messages`, one per partition (of each message's call shard). */
  private async enqueue(messages: readonly PushMessage[], attempts: number, delayMs: number): Promise<void> {
    const byPartition = new Map<number, PushMessage[]>();
    for (const m of messages) {
      const p = partitionOfShard(shardOf(m.callId, this.deps.partitioning.shards), this.deps.partitioning.partitions);
      byPartition.set(p, [...(byPartition.get(p) ?? []), m]);
    }
    await Promise.all(
      [...byPartition].map(([p, batch]) => this.deps.retryQueues[p]!.add('retry', { attempts, messages: batch }, { delay: delayMs })),
    );
  }

  /** A missed-call alert's result that is no provider's answer (skipped-seen, skipped-repeat). */
  private countMissed(m: MissedMessage, result: string): void {
    this.count(providerOf(m), result);
    this.deps.observeMissed?.(platformOf(m), result);
  }

  private count(provider: string, result: string): void {
    const k = `${provider}:${result}`;
    this.deps.outcomes.set(k, (this.deps.outcomes.get(k) ?? 0) + 1);
  }
}

function resultLabel(result: SendResult): string {
  if (result.ok) return 'accepted';
  return { invalidToken: 'invalid-token', retry: 'retry', misconfigured: 'misconfigured', fatal: 'rejected' }[result.kind];
}

function providerOf(m: PushMessage): 'apns' | 'fcm' {
  return m.kind === 'androidPush' ? 'fcm' : 'apns';
}

function platformOf(m: PushMessage): 'ios' | 'android' {
  return m.kind === 'androidPush' ? 'android' : 'ios';
}
