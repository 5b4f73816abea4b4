import { randomUUID } from 'node:crypto';
import type { Socket as UdpSocket } from 'node:dgram';
import type { EventPayload } from '../../src/events/payloads.js';
import { nowMs } from '../lib/clock.js';
import { JsonHttp } from '../lib/http.js';
import { registerAndListen } from '../lib/pushDevices.js';
import { InFlight, Rota, runRecorded, startRecord, type RecordedRun } from '../lib/lifecycleRun.js';
import { mapLimit, openDeviceSocket, type DeviceSocket } from '../lib/signaling.js';
import { device, type Device } from '../lib/users.js';
import { BenchFailure, countInto, Waiter, type LifecycleCounts } from '../lib/waiter.js';
import type { Task } from './task.js';

/**
 * Full call lifecycles, open loop, each between a caller and a callee with `devices` devices,
 * every device with its signaling socket:
 *   create (caller, HTTP) → `call.invited` on each callee socket (and a push at the fake
 *   providers, measured there) → each callee device answers as soon as it rings → exactly one
 *   200, the others 409 `answer_conflict` → `call.accepted` on the caller's socket and
 *   `call.ended answeredElsewhere` on the losing devices → the caller hangs up → the answering
 *   device gets `call.ended remoteEnded` (the caller learns from its own HTTP response: the
 *   audience rules, src/events/audience.ts, never echo a device's own action back to it).
 * With devices = 1 this is the plain lifecycle; with more it is the answer storm.
 * When push is set up, each callee device has a push token (iOS VoIP or Android, alternately)
 * and rings only once both its `call.invited` and its push (announced by the fake providers
 * over UDP) arrived, so a push is never skipped by the server as "already answered".
 */

export interface CallsSetup {
  baseUrl: string;
  wsBase: string;
  secret: string;
  tag: string;
  gen: number;
  pairs: number;
  devices: number;
  /** Register a push token for every callee device (alternating iOS VoIP and Android). */
  push?: { bundleId: string; androidAppId: string };
  connections?: number;
  localAddress?: string;
  /** How answer and end go: HTTP requests, or command frames on the devices' sockets (docs/signaling.md "Commands"). */
  over: 'http' | 'socket';
}

export interface CallsRun {
  label: string;
  rate: number;
  durationMs: number;
  startAtMs: number;
  /** A lifecycle not done after this long counts as a timeout error. */
  timeoutMs: number;
}

/** What a calls generator counts over a run; a step sums them over its generators (callSteps.ts). */
export interface CallCounts extends LifecycleCounts {
  anomalies: Record<string, number>;
  /** Android push signals the fake providers accepted, by event type (expected, not anomalies). */
  pushSignals: Record<string, number>;
  /** Answers by HTTP status (storms). */
  answers: Record<string, number>;
}

export interface CallsResult extends CallCounts, RecordedRun {}

interface Pair {
  caller: Device;
  calleeUserId: string;
  devices: Device[];
}

/** How long a pair rests between two calls (lib/lifecycleRun.ts). */
export const PAIR_REST_MS = 250;

/** The in-flight state of one call, fed by the socket handlers. */
class CallState {
  readonly invited: Waiter[];
  readonly pushed: Waiter[];
  readonly elsewhere: Waiter[];
  readonly ended: Waiter[];
  readonly accepted = new Waiter();
  constructor(
    readonly callId: string,
    readonly startedAt: number,
    devices: number,
  ) {
    this.invited = Array.from({ length: devices }, () => new Waiter());
    this.pushed = Array.from({ length: devices }, () => new Waiter());
    this.elsewhere = Array.from({ length: devices }, () => new Waiter());
    this.ended = Array.from({ length: devices }, () => new Waiter());
  }
  failAll(err: Error): void {
    for (const w of [...this.invited, ...this.pushed, ...this.elsewhere, ...this.ended, this.accepted]) w.fail(err);
  }

  /** Fails every awaited event that has not arrived, naming it. */
  fail(timeoutMs: number): void {
    const why = (what: string) => new BenchFailure(`timeout: no ${what} within ${timeoutMs} ms`);
    this.invited.forEach((w) => w.fail(why('call.invited')));
    this.pushed.forEach((w) => w.fail(why('push at the fake provider')));
    this.elsewhere.forEach((w) => w.fail(why('call.ended answeredElsewhere')));
    this.ended.forEach((w) => w.fail(why('call.ended remoteEnded')));
    this.accepted.fail(why('call.accepted'));
  }
}

export function createTask(): Task {
  let s: CallsSetup;
  let http: JsonHttp;
  const pairs: Pair[] = [];
  const rota = new Rota(pairs, PAIR_REST_MS, 'generator: pair reused without rest (raise pairsPerGenerator)');
  const sockets: DeviceSocket[] = [];
  /** Each device's socket, by installationId (commands over the socket). */
  const socketOf = new Map<string, DeviceSocket>();
  const active = new InFlight<CallState>();
  let anomalies: Record<string, number> = {};
  let pushSignals: Record<string, number> = {};
  let closes = 0;
  let udp: UdpSocket | undefined;

  const onCallerEvent = (ev: EventPayload, at: number) => {
    const st = active.get(ev.callId);
    if (!st) return countInto(anomalies, `caller:${ev.type}:unknown-call`);
    if (ev.type === 'call.accepted') {
      if (!st.accepted.fire(at)) countInto(anomalies, 'caller:call.accepted:duplicate');
    } else if (ev.type === 'call.ended') {
      // The call ended on the server's side (e.g. busy: the callee was still in a call).
      st.failAll(new BenchFailure(`caller got call.ended ${ev.reason}`));
    } else countInto(anomalies, `caller:${ev.type}:unexpected`);
  };

  const onCalleeEvent = (k: number) => (ev: EventPayload, at: number) => {
    const st = active.get(ev.callId);
    if (!st) return countInto(anomalies, `callee:${ev.type}:unknown-call`);
    let fresh = true;
    if (ev.type === 'call.invited') fresh = st.invited[k]!.fire(at);
    else if (ev.type === 'call.ended' && ev.reason === 'answeredElsewhere') fresh = st.elsewhere[k]!.fire(at);
    else if (ev.type === 'call.ended' && ev.reason === 'remoteEnded') fresh = st.ended[k]!.fire(at);
    else return countInto(anomalies, `callee:${ev.type}:${'reason' in ev ? ev.reason : ''}:unexpected`);
    if (!fresh) countInto(anomalies, `callee:${ev.type}:duplicate`);
  };

  /** A call command as the device sends it (HTTP or a frame), with the route's status and body text. */
  const command = async (d: Device, type: 'answer' | 'end', callId: string, body: { operationId: string } & Record<string, unknown>): Promise<{ status: number; text: string }> => {
    if (s.over === 'http') return http.post(`/v1/calls/${callId}/${type}`, d.token, body);
    const reply = await socketOf.get(d.installationId)!.command(type, callId, body);
    return { status: reply.status, text: JSON.stringify(reply.body) };
  };

  return {
    async setup(raw) {
      s = raw as CallsSetup;
      http = new JsonHttp(s.baseUrl, { connections: s.connections ?? 32, timeoutMs: 10_000, ...(s.localAddress ? { localAddress: s.localAddress } : {}) });
      for (let p = 0; p < s.pairs; p++) {
        const base = `${s.tag}-g${s.gen}-p${p}`;
        const calleeUserId = `${base}-callee`;
        pairs.push({
          caller: device(s.secret, `${base}-caller`, `${base}-caller-phone`, 'Bench Caller'),
          calleeUserId,
          devices: Array.from({ length: s.devices }, (_, k) => device(s.secret, calleeUserId, `${calleeUserId}-d${k}`)),
        });
      }
      const conns: { d: Device; onEvent: (ev: EventPayload, at: number) => void }[] = [];
      for (const p of pairs) {
        conns.push({ d: p.caller, onEvent: onCallerEvent });
        p.devices.forEach((d, k) => conns.push({ d, onEvent: onCalleeEvent(k) }));
      }
      sockets.push(
        ...(await mapLimit(conns, 64, async (c) => {
          const socket = await openDeviceSocket({
            wsBase: s.wsBase,
            token: c.d.token,
            onEvent: c.onEvent,
            onClose: () => closes++,
            ...(s.localAddress ? { localAddress: s.localAddress } : {}),
          });
          socketOf.set(c.d.installationId, socket);
          return socket;
        })),
      );
      let registered = 0;
      let udpPort = 0;
      if (s.push) {
        const regs = pairs.flatMap((p, pi) => p.devices.map((d, k) => ({ d, ios: (pi + k) % 2 === 0 })));
        const leg = await registerAndListen(s.baseUrl, regs, s.push, {
          inFlight: (callId) => active.get(callId) !== undefined,
          invited: (callId, d) => active.get(callId)!.pushed[Number(/-d(\d+)$/.exec(d.installationId)![1])]!.fire(nowMs()),
          count: (into, key) => countInto(into === 'signals' ? pushSignals : anomalies, key),
        });
        udp = leg.udp;
        udpPort = udp.address().port;
        registered = leg.registered;
      }
      return { sockets: sockets.length, pushTokens: registered, udpPort, route: `${s.tag}.${s.gen}` };
    },

    async run(raw, progress) {
      const r = raw as CallsRun;
      const answers: Record<string, number> = {};
      anomalies = {};
      pushSignals = {};
      const rec = startRecord(r.startAtMs, anomalies);
      const { hist } = rec;
      const closesBefore = closes;
      rota.restart();

      const lifecycle = (seq: number, sched: number) => rota.run(seq, sched, rec, async (pair) => {
        // The scheduled time rides in the callId so the push fakes can time the push leg.
        const callId = `${s.tag}.${s.gen}.${seq}.${Math.round(sched * 1000)}`;
        const st = new CallState(callId, sched, pair.devices.length);
        await active.during(callId, st, async () => {
          const created = await http.post('/v1/calls', pair.caller.token, { callId, calleeUserId: pair.calleeUserId, operationId: randomUUID(), video: false });
          if (created.status !== 201) throw new BenchFailure(`create: HTTP ${created.status}`);
          hist.get('create').recordMs(nowMs() - sched);

          let firstAnswerAt = Infinity;
          const outcomes = await Promise.all(
            pair.devices.map(async (d, k) => {
              const invitedAt = await st.invited[k]!.wait();
              hist.get('invite (ws)').recordMs(invitedAt - sched);
              // A lone device rings once the push reached it too (its latency is timed by the
              // fakes). In a storm every device answers on its invitation at once instead: the
              // server rightly skips the pushes of a call answered meanwhile.
              if (s.push && pair.devices.length === 1) await st.pushed[k]!.wait();
              const t0 = nowMs();
              firstAnswerAt = Math.min(firstAnswerAt, t0);
              const res = await command(d, 'answer', callId, { installationId: d.installationId, operationId: randomUUID() });
              hist.get('answer').recordMs(nowMs() - t0);
              countInto(answers, String(res.status));
              return { k, res };
            }),
          );
          const winners = outcomes.filter((o) => o.res.status === 200);
          if (winners.length !== 1) throw new BenchFailure(`answer: ${winners.length} winners (statuses ${outcomes.map((o) => o.res.status).join(',')})`);
          for (const o of outcomes) {
            if (o.res.status === 200) continue;
            if (o.res.status !== 409 || !o.res.text.includes('"answer_conflict"') || !o.res.text.includes('"snapshot"')) {
              throw new BenchFailure(`answer: loser got HTTP ${o.res.status} without answer_conflict + snapshot`);
            }
          }
          const winner = winners[0]!.k;

          const acceptedAt = await st.accepted.wait();
          hist.get('answer → accepted (ws)').recordMs(acceptedAt - firstAnswerAt);
          for (let k = 0; k < pair.devices.length; k++) {
            if (k === winner) continue;
            hist.get('answer → answeredElsewhere (ws)').recordMs((await st.elsewhere[k]!.wait()) - firstAnswerAt);
          }

          const tEnd = nowMs();
          const ended = await command(pair.caller, 'end', callId, { reason: 'localHangup', operationId: randomUUID() });
          if (ended.status !== 200) throw new BenchFailure(`end: HTTP ${ended.status}`);
          hist.get('end').recordMs(nowMs() - tEnd);
          const endedAt = await st.ended[winner]!.wait();
          hist.get('end → ended (ws)').recordMs(endedAt - tEnd);
        }, () => http.post(`/v1/calls/${callId}/end`, pair.caller.token, { reason: 'localHangup', operationId: randomUUID() }));
      });

      const run = await runRecorded(r, rec, progress, active, lifecycle, () => closes - closesBefore);
      return { ...run, pushSignals, answers } satisfies CallsResult;
    },

    async teardown() {
      udp?.close();
      for (const so of sockets) so.close();
      await http?.close();
    },
  };
}
