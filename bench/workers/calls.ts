import { randomUUID } from 'node:crypto';
import type { EventPayload } from '../../src/events/payloads.js';
import { CallGenerator, PUSH_HOP, type CallsRun, type SocketOwner } from '../lib/callGenerator.js';
import { nowMs } from '../lib/clock.js';
import { InFlight } from '../lib/lifecycleRun.js';
import { device, type Device } from '../lib/users.js';
import { BenchFailure, countInto, Waiter } from '../lib/waiter.js';
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

interface Pair {
  caller: Device;
  calleeUserId: string;
  devices: Device[];
}

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
  const pairs: Pair[] = [];
  const gen = new CallGenerator(pairs, 'generator: pair reused without rest (raise pairsPerGenerator)');
  const active = new InFlight<CallState>();

  const onCallerEvent = (ev: EventPayload, at: number) => {
    const st = active.get(ev.callId);
    if (!st) return countInto(gen.anomalies, `caller:${ev.type}:unknown-call`);
    if (ev.type === 'call.accepted') {
      if (!st.accepted.fire(at)) countInto(gen.anomalies, 'caller:call.accepted:duplicate');
    } else if (ev.type === 'call.ended') {
      // The call ended on the server's side (e.g. busy: the callee was still in a call).
      st.failAll(new BenchFailure(`caller got call.ended ${ev.reason}`));
    } else countInto(gen.anomalies, `caller:${ev.type}:unexpected`);
  };

  const onCalleeEvent = (k: number) => (ev: EventPayload, at: number) => {
    const st = active.get(ev.callId);
    if (!st) return countInto(gen.anomalies, `callee:${ev.type}:unknown-call`);
    let fresh = true;
    if (ev.type === 'call.invited') fresh = st.invited[k]!.fire(at);
    else if (ev.type === 'call.ended' && ev.reason === 'answeredElsewhere') fresh = st.elsewhere[k]!.fire(at);
    else if (ev.type === 'call.ended' && ev.reason === 'remoteEnded') fresh = st.ended[k]!.fire(at);
    else return countInto(gen.anomalies, `callee:${ev.type}:${'reason' in ev ? ev.reason : ''}:unexpected`);
    if (!fresh) countInto(gen.anomalies, `callee:${ev.type}:duplicate`);
  };

  /** A call command as the device sends it (HTTP or a frame), with the route's status and body text. */
  const command = async (d: Device, type: 'answer' | 'end', callId: string, body: { operationId: string } & Record<string, unknown>): Promise<{ status: number; text: string }> => {
    if (s.over === 'http') return gen.http.post(`/v1/calls/${callId}/${type}`, d.token, body);
    const reply = await gen.socketOf(d).command(type, callId, body);
    return { status: reply.status, text: JSON.stringify(reply.body) };
  };

  return {
    async setup(raw) {
      s = raw as CallsSetup;
      for (let p = 0; p < s.pairs; p++) {
        const base = `${s.tag}-g${s.gen}-p${p}`;
        const calleeUserId = `${base}-callee`;
        pairs.push({
          caller: device(s.secret, `${base}-caller`, `${base}-caller-phone`, 'Bench Caller'),
          calleeUserId,
          devices: Array.from({ length: s.devices }, (_, k) => device(s.secret, calleeUserId, `${calleeUserId}-d${k}`)),
        });
      }
      const owners: SocketOwner[] = [];
      for (const p of pairs) {
        owners.push({ d: p.caller, onEvent: onCallerEvent });
        p.devices.forEach((d, k) => owners.push({ d, onEvent: onCalleeEvent(k) }));
      }
      const regs = pairs.flatMap((p, pi) => p.devices.map((d, k) => ({ d, ios: (pi + k) % 2 === 0 })));
      return gen.connect(s, owners, regs, {
        inFlight: (callId) => active.get(callId) !== undefined,
        invited: (callId, d) => active.get(callId)!.pushed[Number(/-d(\d+)$/.exec(d.installationId)![1])]!.fire(nowMs()),
      });
    },

    run: (raw, progress) =>
      gen.run(raw as CallsRun, progress, active, async (pair, seq, sched, { hist }) => {
        const callId = gen.callId(seq, sched);
        const st = new CallState(callId, sched, pair.devices.length);
        await active.during(callId, st, async () => {
          const committedAt = await gen.create(hist, pair.caller.token, sched, { callId, calleeUserId: pair.calleeUserId });
          // The push path hop by hop (the report's breakdown of a push step's p99): the create's
          // commit (Redis time: the call and its outbox entry, one script), then the push's
          // arrival at the fake provider; the relay's own lag and the provider round trip come
          // from the worker's metrics (scenarios/callSteps.ts).
          if (committedAt !== undefined) hist.get(`${PUSH_HOP} scheduled start → create committed`).recordMs(committedAt - sched);

          let firstAnswerAt = Infinity;
          const outcomes = await Promise.all(
            pair.devices.map(async (d, k) => {
              const invitedAt = await st.invited[k]!.wait();
              hist.get('invite (ws)').recordMs(invitedAt - sched);
              // A lone device rings once the push reached it too (its latency is timed by the
              // fakes). In a storm every device answers on its invitation at once instead: the
              // server rightly skips the pushes of a call answered meanwhile.
              if (s.push && pair.devices.length === 1) {
                const pushedAt = await st.pushed[k]!.wait();
                if (committedAt !== undefined) hist.get(`${PUSH_HOP} create committed → provider request`).recordMs(pushedAt - committedAt);
              }
              const t0 = nowMs();
              firstAnswerAt = Math.min(firstAnswerAt, t0);
              const res = await command(d, 'answer', callId, { installationId: d.installationId, operationId: randomUUID() });
              hist.get('answer').recordMs(nowMs() - t0);
              countInto(gen.answers, String(res.status));
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
        }, () => gen.http.post(`/v1/calls/${callId}/end`, pair.caller.token, { reason: 'localHangup', operationId: randomUUID() }));
      }),

    teardown: () => gen.close(),
  };
}
