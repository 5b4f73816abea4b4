import { createSocket } from 'node:dgram';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeApnsKey, startFakeApns, type ApnsRecordedRequest, type FakeApns } from '../../test/support/apns-server.js';
import { startFakeFcm, writeServiceAccountFile, type FakeFcm, type FcmRecordedMessage } from '../../test/support/fcm-server.js';
import { nowMs } from '../lib/clock.js';
import { HistogramSet } from '../lib/histogram.js';
import { countInto } from '../lib/waiter.js';
import type { Task } from './task.js';

/**
 * The local push providers (the test suite's fake APNs over h2c and fake FCM with its OAuth
 * endpoint, which check what the real ones check), in their own process so their CPU is not
 * counted as the generators'. Each accepted invitation push is timed against the lifecycle's
 * scheduled start, which the bench puts into the callId (`<tag>.<gen>.<seq>.<scheduled µs>`).
 * The fakes' request logs are not kept (a long run would fill memory); only the timings are.
 * Each accepted push is also announced (`<callId>\n<device token>`, one UDP datagram on
 * loopback) to the generator that made the call, whose device then "rings" and may answer.
 */

export type PushFakesRun = { op: 'collect' } | { op: 'route'; routes: Record<string, number> };

export function createTask(): Task {
  let apns: FakeApns;
  let fcm: FakeFcm;
  let hist = new HistogramSet();
  let statuses: Record<string, number> = {};
  let unmatched = 0;
  const routes = new Map<string, number>();
  const udp = createSocket('udp4');

  const scheduledOf = (callpayload: unknown): number | undefined => {
    const callId = (callpayload as { callId?: unknown } | undefined)?.callId;
    if (typeof callId !== 'string') return undefined;
    const parts = callId.split('.');
    const us = Number(parts[parts.length - 1]);
    return parts.length === 4 && us > 1e15 ? us / 1000 : undefined;
  };

  const onPush = (provider: string, status: number, callpayload: unknown, token: string) => {
    const at = nowMs();
    const callId = (callpayload as { callId?: unknown } | undefined)?.callId;
    const type = (callpayload as { type?: unknown } | undefined)?.type;
    // Every accepted message goes to the generator, signals included, with its event type.
    if (status === 200 && typeof callId === 'string') {
      const parts = callId.split('.');
      const port = routes.get(`${parts[0]}.${parts[1]}`);
      if (port) udp.send(`${callId}\n${token}\n${String(type)}`, port, '127.0.0.1');
    }
    countInto(statuses, `${provider} ${status}`);
    const sched = scheduledOf(callpayload);
    if (sched === undefined) {
      unmatched++;
      return;
    }
    if (status === 200 && type === 'call.invited') hist.get(`push: ${provider} invite`).recordMs(at - sched);
    else if (status === 200) countInto(statuses, `${provider} signal ${String(type)}`);
  };

  return {
    async setup() {
      const dir = mkdtempSync(join(tmpdir(), 'bench-push-'));
      const key = makeApnsKey();
      const bundleId = 'com.example.bench';
      apns = await startFakeApns({ bundleId, keyId: key.keyId, teamId: key.teamId, publicKey: key.publicKey });
      const keyFile = join(dir, `AuthKey_${key.keyId}.p8`);
      writeFileSync(keyFile, key.privateKeyPem, { mode: 0o600 });
      fcm = await startFakeFcm();
      const accountFile = writeServiceAccountFile(dir, fcm.serviceAccount.json);

      (apns.requests as { push: (...r: ApnsRecordedRequest[]) => number }).push = (...recs) => {
        for (const r of recs) onPush('APNs', r.status, (r.body as { callpayload?: unknown } | undefined)?.callpayload, r.token);
        return 0;
      };
      (fcm.messages as { push: (...m: FcmRecordedMessage[]) => number }).push = (...msgs) => {
        for (const m of msgs) {
          const raw = (m.body as { message?: { data?: { callpayload?: unknown } } } | undefined)?.message?.data?.callpayload;
          let payload: unknown;
          try {
            payload = typeof raw === 'string' ? JSON.parse(raw) : undefined;
          } catch {
            payload = undefined;
          }
          onPush('FCM', m.status, payload, m.token ?? '');
        }
        return 0;
      };
      return {
        bundleId,
        androidAppId: 'com.example.bench',
        env: {
          IOS_PUSH_URL: apns.url,
          IOS_PUSH_SANDBOX_URL: apns.url,
          IOS_PUSH_KEY_FILE: keyFile,
          IOS_PUSH_KEY_ID: key.keyId,
          IOS_PUSH_TEAM_ID: key.teamId,
          IOS_BUNDLE_ID: bundleId,
          ANDROID_PUSH_URL: fcm.url,
          ANDROID_PROJECT_ID: fcm.projectId,
          ANDROID_SERVICE_ACCOUNT_FILE: accountFile,
        },
      };
    },

    async run(raw) {
      const r = raw as PushFakesRun;
      if (r.op === 'route') {
        for (const [k, v] of Object.entries(r.routes)) routes.set(k, v);
        return {};
      }
      const out = { hist: hist.serialize(), statuses, unmatched };
      hist = new HistogramSet();
      statuses = {};
      unmatched = 0;
      return out;
    },

    async teardown() {
      udp.close();
      await Promise.all([apns?.close(), fcm?.close()]);
    },
  };
}
