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
