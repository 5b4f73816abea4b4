import { randomUUID } from 'node:crypto';
import { nowMs, sleepUntil } from '../lib/clock.js';
import { Histogram, type SerializedHistogram } from '../lib/histogram.js';
import { JsonHttp } from '../lib/http.js';
import { device } from '../lib/users.js';
import { countInto } from '../lib/waiter.js';
import type { Task } from './task.js';

/**
 * Closed-loop HTTP load with the same client and the same request shape as the lifecycles
 * (bearer token, a create-call-sized JSON body): `concurrency` requests always in flight.
 * Used for the raw uWS HTTP ceiling.
 */

export interface HttpLoadSetup {
  baseUrl: string;
  secret: string;
  connections: number;
}
export interface HttpLoadRun {
  concurrency: number;
  durationMs: number;
  startAtMs: number;
}
export interface HttpLoadResult {
  requests: number;
  perSecond: number;
  errors: Record<string, number>;
  hist: SerializedHistogram;
}

export function createTask(): Task {
  let http: JsonHttp;
  let token: string;
  return {
    async setup(raw) {
      const s = raw as HttpLoadSetup;
      http = new JsonHttp(s.baseUrl, { connections: s.connections });
      token = device(s.secret, 'ceiling-user', 'ceiling-phone').token;
      return {};
    },
    async run(raw) {
      const r = raw as HttpLoadRun;
      const hist = new Histogram();
      const errors: Record<string, number> = {};
      let n = 0;
      await sleepUntil(r.startAtMs);
      const t0 = nowMs();
      const end = t0 + r.durationMs;
      const body = { callId: randomUUID(), calleeUserId: 'ceiling-callee', operationId: randomUUID(), video: false };
      await Promise.all(
        Array.from({ length: r.concurrency }, async () => {
          while (nowMs() < end) {
            const s = nowMs();
            try {
              const res = await http.post('/v1/calls', token, body);
              if (res.status !== 200) countInto(errors, `HTTP ${res.status}`);
            } catch (err) {
              countInto(errors, (err as Error).message.slice(0, 60));
            }
            hist.recordMs(nowMs() - s);
            n++;
          }
        }),
      );
      const wall = nowMs() - t0;
      return { requests: n, perSecond: (n * 1000) / wall, errors, hist: hist.serialize() } satisfies HttpLoadResult;
    },
    async teardown() {
      await http?.close();
    },
  };
}
