import WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { SignalingClient as Device } from '@calling-backend/client';
import { stackForFile, type Stack } from '../support/stack.js';
import { tokenFor } from '../support/tokens.js';
import { uid } from '../support/fixtures.js';
import { waitUntil, sleep } from '../support/wait.js';
import { connect, type SignalingClient } from '../support/ws-client.js';
import { CLOSE } from '../../src/contracts/signaling.js';

/**
 * Admission control (docs/signaling.md "A reconnect storm", src/gateway/admission.ts): a gateway
 * takes WS_ADMISSIONS_PER_S new sockets a second, one second's worth at once; a socket beyond it
 * is closed at once with 1013 and a time to come back, the times spaced one admission apart; the
 * client package comes back then, and every device gets in.
 */

const PER_S = 20;
let url: string;
let metricsUrl: string;
let stack: Stack;
const raw: SignalingClient[] = [];
const devices: Device[] = [];

stackForFile({ WS_ADMISSIONS_PER_S: String(PER_S) }, (s) => {
  stack = s;
  url = s.url;
  metricsUrl = s.servers[0]!.metricsUrl;
});

afterEach(async () => {
  for (const d of devices.splice(0)) d.stop();
  await Promise.all(raw.splice(0).map((c) => c.close()));
});

const person = () => ({ userId: uid('adm'), installationId: uid('phone') });

/** Until the gateway's bucket is full again (one second's worth), after a test that emptied it. */
const refill = () => sleep(1000 + 100);

describe('admission control', () => {
  it(`admits ${PER_S} sockets at once; the rest are closed with 1013 and times to come back spaced 1/${PER_S} s apart`, async () => {
    await refill();
    const sockets = await Promise.all(Array.from({ length: 3 * PER_S }, () => connect(url, tokenFor(person()), { waitSynced: false })));
    raw.push(...sockets);
    await waitUntil('every socket synced or closed', () => sockets.every((s) => s.closeInfo || s.frames.some((f) => f.type === 'synced')));
    const refused = sockets.filter((s) => s.closeInfo);
    // The bucket refills while the sockets come in: at least PER_S in, and most of the rest out.
    expect(sockets.length - refused.length).toBeGreaterThanOrEqual(PER_S);
    expect(refused.length).toBeGreaterThanOrEqual(PER_S);
    const waits = refused.map((s) => {
      expect(s.closeInfo!.code).toBe(CLOSE.tryAgainLater);
      expect(s.frames.filter((f) => f.type === 'event' || f.type === 'synced'), 'nothing is sent to a refused socket').toEqual([]);
      const m = /^server busy; retry after (\d+) ms$/.exec(s.closeInfo!.reason);
      expect(m, s.closeInfo!.reason).not.toBeNull();
      return Number(m![1]);
    });
    // The times are a queue one admission (50 ms) apart (their spacing exactly:
    // test/unit/admission.test.ts): the last refused waits about as long as the queue is.
    expect(Math.min(...waits)).toBeGreaterThan(0);
    expect(Math.max(...waits)).toBeGreaterThanOrEqual((refused.length - 1) * (1000 / PER_S) - 1000);
    expect(Math.max(...waits)).toBeLessThanOrEqual((refused.length + 1) * (1000 / PER_S) + 100);
    const metrics = await (await fetch(`${metricsUrl}/metrics`)).text();
    expect(Number(/^calling_ws_admissions_refused_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(refused.length);
  });

  it('the client package comes back at the time it was given, not before, and every device gets in', async () => {
    await refill();
    const n = 3 * PER_S;
    const closes: { code: number; reason: string; atMs: number }[][] = [];
    const reconnects: number[][] = [];
    for (let i = 0; i < n; i++) {
      const mine: { code: number; reason: string; atMs: number }[] = [];
      const opened: number[] = [];
      closes.push(mine);
      reconnects.push(opened);
      const Counted = class extends WebSocket {
        constructor(u: string, protocols?: string | string[], options?: WebSocket.ClientOptions) {
          super(u, protocols, options);
          opened.push(Date.now());
        }
      };
      devices.push(
        new Device({
          url: url.replace(/^http/, 'ws'),
          token: tokenFor(person()),
          WebSocket: Counted as unknown as typeof WebSocket,
          onEvent: () => {},
          onClose: (code, reason) => mine.push({ code, reason, atMs: Date.now() }),
        }),
      );
    }
    await Promise.all(devices.map((d) => d.start()));
    const told = closes.flat().filter((c) => c.code === CLOSE.tryAgainLater);
    expect(told.length).toBeGreaterThan(0);
    for (let i = 0; i < n; i++) {
      // After each 1013, the next connection waited at least the time the reason gave.
      closes[i]!.forEach((c, k) => {
        const wait = Number(/retry after (\d+) ms/.exec(c.reason)![1]);
        expect(reconnects[i]![k + 1]! - c.atMs, `device ${i}, close ${k}`).toBeGreaterThanOrEqual(wait - 5);
      });
    }
    // Admitted at about PER_S a second: all in within the times handed out, and no device needed
    // more than a few tries.
    expect(Math.max(...closes.map((c) => c.length))).toBeLessThanOrEqual(4);
  }, 30_000);

  it('after a gateway crash, the client package spreads its first reconnect over the window the gateway gave', async () => {
    const n = 3 * PER_S;
    const doomed = await stack.addServer({ WS_ADMISSIONS_PER_S: String(PER_S) });
    let crashed = false;
    const firstTry: number[] = [];
    for (let i = 0; i < n; i++) {
      let mine: number | undefined;
      // A load balancer's view: once the gateway is dead, its address leads to the other one.
      const Balanced = class extends WebSocket {
        constructor(u: string, protocols?: string | string[], options?: WebSocket.ClientOptions) {
          super(crashed ? u.replace(`:${doomed.port}/`, `:${stack.servers[0]!.port}/`) : u, protocols, options);
          if (crashed && mine === undefined) firstTry.push((mine = Date.now()));
        }
      };
      devices.push(new Device({ url: doomed.url.replace(/^http/, 'ws'), token: tokenFor(person()), WebSocket: Balanced as unknown as typeof WebSocket, onEvent: () => {}, onClose: () => {} }));
      // One second's worth at once, then the rest as the bucket refills: no 1013 here.
      if (i % PER_S === PER_S - 1) await refill();
      await devices.at(-1)!.start();
    }
    // The last one in was told the time PER_S a second takes to admit the sockets beyond the first
    // second's worth: (n - 1 - PER_S) / PER_S s.
    await refill();
    crashed = true;
    const killedAt = Date.now();
    doomed.child.kill('SIGKILL');
    await waitUntil('every device tried again', () => firstTry.length === n, 15_000);
    // Device k in was told (k - PER_S) / PER_S s once past 250 ms (up to about 2 s), not the
    // client's own 250 ms: the tries spread (about 16 of 60 expected past 500 ms; without the
    // window every first try comes within about 300 ms).
    const after = firstTry.map((t) => t - killedAt).sort((a, b) => a - b);
    expect(after.filter((ms) => ms > 500).length, `first tries ${after.join(' ')} ms after the crash`).toBeGreaterThanOrEqual(6);
    expect(after.at(-1)).toBeLessThanOrEqual(((n - PER_S) * 1000) / PER_S + 1500);
  }, 30_000);
});
