import { randomUUID } from 'node:crypto';
import { nowMs } from '../lib/clock.js';
import type { Device } from '../lib/users.js';
import type { Task } from './task.js';

/**
 * The steady flow of changes under the reconnect storm (bench/scenarios/reconnect.ts), in a
 * process of its own: the storming devices saturate the bench process, and a change's latency
 * timed there would be that process's event loop, not the server. `rate` changes a second, each
 * to the next idle pair: a call created, answered, renamed three times with an in-call message
 * after each rename, ended; then again. `run({ start: true })` starts the flow and returns;
 * `run({ stop: true })` stops it, waits for the changes in flight, and returns what was timed.
 */

export interface StormPair {
  caller: Device;
  callee: Device;
  /** Both devices on the gateway that survives: the storm's unaffected calls. */
  unaffected: boolean;
}

export interface StormChangesSetup {
  apiUrl: string;
  pairs: StormPair[];
  rate: number;
}

export interface StormChangesResult {
  /** Each change: when it was sent (epoch ms), how long it took, whether its pair is unaffected. */
  latency: { atMs: number; ms: number; unaffected: boolean }[];
  errors: Record<string, number>;
}

const STEPS = ['create', 'answer', 'rename', 'message', 'rename', 'message', 'rename', 'message', 'end'] as const;

export function createTask(): Task {
  let setup: StormChangesSetup;
  const pairs: (StormPair & { callId?: string; step: number; busy: boolean })[] = [];
  const latency: StormChangesResult['latency'] = [];
  const errors: Record<string, number> = {};
  const count = (k: string) => (errors[k] = (errors[k] ?? 0) + 1);
  const inFlight = new Set<Promise<void>>();
  let ticker: NodeJS.Timeout | undefined;

  const post = async (d: Device, path: string, body: unknown) => {
    const res = await fetch(`${setup.apiUrl}${path}`, { method: 'POST', headers: { authorization: `Bearer ${d.token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    await res.arrayBuffer();
    if (res.status >= 300) count(`${path.split('/').at(-1)} ${res.status}`);
  };
  const advance = async (pair: (typeof pairs)[number]) => {
    const step = STEPS[pair.step % STEPS.length]!;
    const t0 = nowMs();
    const op = { operationId: randomUUID() };
    if (step === 'create') {
      pair.callId = randomUUID();
      await post(pair.caller, '/v1/calls', { ...op, callId: pair.callId, calleeUserId: pair.callee.userId });
    } else if (step === 'answer') await post(pair.callee, `/v1/calls/${pair.callId}/answer`, { ...op, installationId: pair.callee.installationId });
    else if (step === 'rename') await post(pair.caller, `/v1/calls/${pair.callId}/rename`, { ...op, displayName: `Caller ${pair.step}` });
    else if (step === 'message') await post(pair.caller, `/v1/calls/${pair.callId}/messages`, { ...op, payload: { n: pair.step } });
    else await post(pair.caller, `/v1/calls/${pair.callId}/end`, { ...op, reason: 'localHangup' });
    latency.push({ atMs: t0, ms: nowMs() - t0, unaffected: pair.unaffected });
    pair.step++;
  };

  return {
    async setup(params) {
      setup = params as StormChangesSetup;
      for (const p of setup.pairs) pairs.push({ ...p, step: 0, busy: false });
      return { pairs: pairs.length };
    },
    async run(params) {
      if ((params as { start?: boolean }).start) {
        let next = 0;
        let owed = 0;
        ticker = setInterval(() => {
          owed += setup.rate / 50;
          for (let tries = 0; owed >= 1 && tries < pairs.length; tries++) {
            const pair = pairs[next++ % pairs.length]!;
            if (pair.busy) continue;
            owed--;
            pair.busy = true;
            const p = advance(pair)
              .catch((err: unknown) => {
                count(`request ${(err as Error).message}`);
              })
              .finally(() => {
                pair.busy = false;
                inFlight.delete(p);
              });
            inFlight.add(p);
          }
        }, 20);
        return {};
      }
      clearInterval(ticker);
      await Promise.all(inFlight);
      return { latency, errors } satisfies StormChangesResult;
    },
  };
}
