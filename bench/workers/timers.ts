import { randomUUID } from 'node:crypto';
import type { EventPayload } from '../../src/events/payloads.js';
import { nowMs, sleep, sleepUntil } from '../lib/clock.js';
import { HistogramSet, type SerializedHistogram } from '../lib/histogram.js';
import { JsonHttp } from '../lib/http.js';
import { mapLimit, openDeviceSocket, type DeviceSocket } from '../lib/signaling.js';
import { device, type Device } from '../lib/users.js';
import { countInto } from '../lib/waiter.js';
import type { Task } from './task.js';

/**
 * Ring timers: creates many calls nobody answers (paced at `rate`, at most `concurrency` in flight),
 * a sample of them to callees whose signaling socket is connected, and times the
 * `call.ended unanswered` each sampled callee receives against the call's expiresAtMs. The
 * scenario reads every call's commit time from Redis afterwards.
 */

export interface TimersSetup {
  baseUrl: string;
  wsBase: string;
  secret: string;
  tag: string;
  gen: number;
  sampleCallees: number;
  callers: number;
}
export interface TimersRun {
  count: number;
  /** Creates per second (paced: the expiries then come at that rate too, not in bursts). */
  rate: number;
  /** At most this many creates in flight. */
  concurrency: number;
  sampleEvery: number;
  startAtMs: number;
  /** Wait this long after the last expiry for the last events. */
  graceMs: number;
}
export interface TimersResult {
  created: number;
  errors: Record<string, number>;
  sampled: number;
  delivered: number;
  hist: Record<string, SerializedHistogram>;
  /** [callId, expiresAtMs] of every created call. */
  calls: [string, number][];
  createMs: number;
}

export function createTask(): Task {
  let s: TimersSetup;
  let http: JsonHttp;
  let callers: Device[] = [];
  let callees: Device[] = [];
  const sockets: DeviceSocket[] = [];
  const sampled = new Map<string, number>();
  let hist = new HistogramSet();
  let delivered = 0;
  let anomalies: Record<string, number> = {};

  const onEvent = (ev: EventPayload, at: number) => {
    if (ev.type !== 'call.ended') return;
    const expiresAt = sampled.get(ev.callId);
    if (expiresAt === undefined) return;
    if (ev.reason !== 'unanswered') {
      countInto(anomalies, `call.ended ${ev.reason}`);
      return;
    }
    sampled.delete(ev.callId);
    delivered++;
    hist.get('call.ended unanswered at the callee − expiresAtMs').recordMs(at - expiresAt);
  };

  return {
    async setup(raw) {
      s = raw as TimersSetup;
      http = new JsonHttp(s.baseUrl, { connections: 32 });
      callers = Array.from({ length: s.callers }, (_, i) => device(s.secret, `${s.tag}-tc${s.gen}-${i}`, `${s.tag}-tc${s.gen}-${i}-phone`, 'Bench Caller'));
      callees = Array.from({ length: s.sampleCallees }, (_, i) => device(s.secret, `${s.tag}-ts${s.gen}-${i}`, `${s.tag}-ts${s.gen}-${i}-phone`));
      sockets.push(...(await mapLimit(callees, 64, (d) => openDeviceSocket({ wsBase: s.wsBase, token: d.token, onEvent }))));
      return { sockets: sockets.length };
    },

    async run(raw, progress) {
      const r = raw as TimersRun;
      hist = new HistogramSet();
      delivered = 0;
      anomalies = {};
      sampled.clear();
      const errors: Record<string, number> = {};
      const calls: [string, number][] = [];
      let next = 0;
      let lastExpiry = 0;
      await sleepUntil(r.startAtMs);
      const t0 = nowMs();
      const ticker = setInterval(() => progress({ created: calls.length, delivered, errors: Object.keys(errors).length }), 1000);
      await Promise.all(
        Array.from({ length: r.concurrency }, async () => {
          for (;;) {
            const i = next++;
            if (i >= r.count) return;
            await sleepUntil(t0 + (i * 1000) / r.rate);
            const sample = i % r.sampleEvery === 0 && callees.length > 0;
            const callee = sample ? callees[(i / r.sampleEvery) % callees.length]!.userId : `${s.tag}-tn${s.gen}-${i}`;
            const callId = `${s.tag}-t${s.gen}-${i}`;
            try {
              const res = await http.post('/v1/calls', callers[i % callers.length]!.token, { callId, calleeUserId: callee, operationId: randomUUID(), video: false });
              if (res.status !== 201) {
                countInto(errors, `create: HTTP ${res.status}`);
                continue;
              }
              const expiresAtMs = (JSON.parse(res.text) as { expiresAtMs: number }).expiresAtMs;
              calls.push([callId, expiresAtMs]);
              lastExpiry = Math.max(lastExpiry, expiresAtMs);
              if (sample) sampled.set(callId, expiresAtMs);
            } catch (err) {
              countInto(errors, `create: ${(err as Error).message.slice(0, 60)}`);
            }
          }
        }),
      );
      const createMs = nowMs() - t0;
      const sampledCount = sampled.size + delivered;
      // Wait for the expiries and their events (or the grace period after the last one).
      while (sampled.size > 0 && nowMs() < lastExpiry + r.graceMs) await sleep(50);
      clearInterval(ticker);
      if (sampled.size > 0) countInto(errors, 'call.ended unanswered not received (sample)', sampled.size);
      for (const [k, v] of Object.entries(anomalies)) countInto(errors, `unexpected ${k}`, v);
      return { created: calls.length, errors, sampled: sampledCount, delivered, hist: hist.serialize(), calls, createMs } satisfies TimersResult;
    },

    async teardown() {
      for (const so of sockets) so.close();
      await http?.close();
    },
  };
}
