import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { CallingClient } from '@calling-backend/client';
import { mapLimit } from './signaling.js';
import type { Device } from './users.js';

/**
 * The generators' side of push: device tokens registered with the server, and the fake
 * providers' announcements of each accepted push (`<callId>\n<device token>\n<event type>`, one
 * UDP datagram on loopback: workers/pushFakes.ts), so a generator's device "rings" on its push.
 */

export interface PushApps {
  bundleId: string;
  androidAppId: string;
}

/** Binds a loopback UDP port for the fakes' announcements; `onPush` gets each one. */
export async function listenForPushes(onPush: (callId: string, token: string, type: string) => void): Promise<UdpSocket> {
  const udp = createSocket('udp4');
  udp.on('message', (msg) => {
    const [callId = '', token = '', type = ''] = msg.toString().split('\n');
    onPush(callId, token, type);
  });
  await new Promise<void>((res) => udp.bind(0, '127.0.0.1', () => res()));
  return udp;
}

/** Registers an iOS VoIP or an Android token for the device; resolves with the token. */
async function registerPushToken(baseUrl: string, d: Device, ios: boolean, push: PushApps): Promise<string> {
  const kind = ios ? 'iosVoip' : 'androidPush';
  const token = ios ? Buffer.from(d.installationId).toString('hex').padEnd(64, '0') : `fcm-${d.installationId}`;
  // Set-up goes through the project's typed client (the measured traffic uses a raw undici pool
  // so the figures are the server's, not the client's).
  const client = new CallingClient({ baseUrl, token: d.token });
  const body = ios ? { token, appId: push.bundleId, iosEnvironment: 'production' as const } : { token, appId: push.androidAppId };
  await client.putPushToken(d.installationId, kind, body).catch((err: unknown) => {
    throw new Error(`push token registration failed: ${(err as Error).message}`);
  });
  return token;
}

/** Registers each device's token (32 at a time), iOS VoIP or Android as said; resolves with each token's device. */
export async function registerPushTokens(baseUrl: string, regs: readonly { d: Device; ios: boolean }[], push: PushApps): Promise<Map<string, Device>> {
  const byToken = new Map<string, Device>();
  await mapLimit(regs, 32, async ({ d, ios }) => {
    byToken.set(await registerPushToken(baseUrl, d, ios, push), d);
  });
  return byToken;
}

/** What a generator keeps of the fakes' announcements to its devices (registerAndListen). */
export interface PushTally {
  /** Whether `callId` is one of the generator's calls in flight. */
  inFlight(callId: string): boolean;
  /** Marks the device's invitation to the call; false when it already had one. */
  invited(callId: string, d: Device): boolean;
  /** Counts an anomaly (`push:unknown-call`, `push:duplicate`) or an Android signal by its type. */
  count(into: 'anomalies' | 'signals', key: string): void;
}

/**
 * A generator's push leg: listens for the fakes' announcements, then registers each device's
 * token. An invitation marks its device (a second one for the same call is `push:duplicate`),
 * any other push (an Android signal) is counted by type, and one for a call or token the
 * generator does not know is `push:unknown-call`. Resolves with the socket and how many tokens.
 */
export async function registerAndListen(baseUrl: string, regs: readonly { d: Device; ios: boolean }[], push: PushApps, tally: PushTally): Promise<{ udp: UdpSocket; registered: number }> {
  let deviceOfToken = new Map<string, Device>();
  const udp = await listenForPushes((callId, token, type) => {
    const d = deviceOfToken.get(token);
    if (!tally.inFlight(callId) || !d) return tally.count('anomalies', 'push:unknown-call');
    if (type !== 'call.invited') return tally.count('signals', type);
    if (!tally.invited(callId, d)) tally.count('anomalies', 'push:duplicate');
  });
  deviceOfToken = await registerPushTokens(baseUrl, regs, push);
  return { udp, registered: deviceOfToken.size };
}
