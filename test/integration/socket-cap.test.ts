import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { device, sibling } from '../support/fixtures.js';
import { connect, upgradeStatus, UpgradeRejected, type SignalingClient } from '../support/ws-client.js';
import { waitUntil } from '../e2e/helpers.js';

/**
 * Per-user socket cap (WS_MAX_SOCKETS_PER_USER, docs/api.md "Abuse limits"): over the cap the upgrade
 * is refused with 429 problem+json and retry-after; the user's open sockets and other users are
 * unaffected; closing one makes room again.
 */

let stack: Stack;
const open: SignalingClient[] = [];

beforeAll(async () => {
  stack = await startStack({ WS_MAX_SOCKETS_PER_USER: '3' });
});
afterAll(async () => {
  await Promise.all(open.map((s) => s.close()));
  await stack?.stop();
});

describe('per-user socket cap', () => {
  it('refuses the socket over the cap with 429, keeps the others, and makes room when one closes', async () => {
    const url = stack.url;
    const first = device(url);
    const devices = [first, sibling(url, first), sibling(url, first), sibling(url, first)];
    for (const d of devices.slice(0, 3)) open.push(await connect(url, d.token));

    const refused = await upgradeStatus(url, devices[3]!.token);
    expect(refused).toBeInstanceOf(UpgradeRejected);
    const r = refused as UpgradeRejected;
    expect(r.status).toBe(429);
    expect(r.headers['content-type']).toBe('application/problem+json');
    expect(r.headers['retry-after']).toBe('10');
    expect(JSON.parse(r.body)).toMatchObject({ code: 'rate_limited', status: 429 });

    // Another user is not affected.
    const other = device(url);
    open.push(await connect(url, other.token));

    // Closing one of the three makes room for the fourth device.
    await open.shift()!.close();
    let admitted: Awaited<ReturnType<typeof upgradeStatus>> | undefined;
    await waitUntil('room for the fourth socket', async () => {
      admitted = await upgradeStatus(url, devices[3]!.token);
      return !(admitted instanceof UpgradeRejected);
    });
    open.push(admitted as SignalingClient);
  });
});
