import { describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { janusRigForFile } from './mediaBrowser.js';
import type { Stack } from '../support/stack.js';
import type { Janus } from '../support/janus.js';
import { acceptedCall, end, expectJson, relayDone, type Device } from '../support/fixtures.js';
import { janusRooms } from '../support/janusClient.js';
import { waitUntil } from '../support/wait.js';
import { janusPeerInPage } from './janusPeer.js';

/**
 * A one-to-one call through Janus in two Chromium pages (docs/operations.md "SFU media"): each
 * page takes its media-session reply (the room, its token, the TURN servers), publishes Chromium's
 * fake camera and microphone to the call's VideoRoom room and subscribes to the other's feed.
 * Each page's getStats shows inbound RTP bytes growing: Janus admitted both tokens and forwarded
 * each side's media to the other. When the call ends, Janus lists no room for it.
 * ICE runs between the pages' and Janus's host candidates (relay-only ICE through coturn, relaying
 * on the host's address, is in janus-group.test.ts).
 */

declare const globalThis: { janusPeer: { inboundBytes(): Promise<number>; feeds: number[]; errors: string[]; states(): string[] } };

const TURN_SECRET = 'janus-browser-turn-secret-7c1d';
const ks = { prefix: 'cb', shards: 8 };

let janus: Janus;
let stack: Stack;
let browser: Browser;

janusRigForFile(TURN_SECRET, { env: { MEDIA_MODE: 'sfu' } }, (rig) => {
  ({ janus, stack, browser } = rig);
});

/** A page on the server's origin (127.0.0.1: a secure context for getUserMedia) in the call through Janus. */
async function inCall(d: Device, callId: string, display: string): Promise<Page> {
  const res = await d.api.post(`/v1/calls/${callId}/media-session`, {});
  expectJson(res, 200);
  const context = await browser.newContext({ permissions: ['camera', 'microphone'] });
  const page = await context.newPage();
  // esbuild's keepNames helper, which the serialised function may call.
  await page.addInitScript('globalThis.__name = (f) => f;');
  await page.goto(`${stack.url}/healthz`);
  const { sfu, iceServers } = res.json;
  await page.evaluate(janusPeerInPage, { url: sfu.url, room: sfu.room, token: sfu.token, iceServers, display });
  return page;
}

const inbound = (page: Page) => page.evaluate(() => globalThis.janusPeer.inboundBytes());

describe('a one-to-one call through Janus in Chromium', () => {
  it('each page receives the other’s media through the room, and the room goes with the call', async () => {
    const { callId, caller, callee } = await acceptedCall(stack.url);
    const alice = await inCall(caller, callId, 'Alice');
    const bob = await inCall(callee, callId, 'Bob');
    for (const page of [alice, bob]) {
      await waitUntil('the page subscribed to the other feed', () => page.evaluate(() => globalThis.janusPeer.feeds.length === 1), 20_000, {
        detail: async () =>
          `page errors: ${JSON.stringify(await page.evaluate(() => globalThis.janusPeer.errors))}, peer connections: ${JSON.stringify(await page.evaluate(() => globalThis.janusPeer.states()))}\n${janus.logs().split("\n").filter((l) => /ice|candidate|fail|err|warn/i.test(l)).slice(-40).join("\n")}`,
      });
      const first = await waitUntil('inbound RTP bytes', async () => (await inbound(page)) > 0, 20_000).then(() => inbound(page));
      await waitUntil('inbound RTP bytes growing', async () => (await inbound(page)) > first, 20_000);
      expect(await page.evaluate(() => globalThis.janusPeer.errors)).toEqual([]);
    }
    expectJson(await end(caller, callId, 'localHangup'), 200);
    await relayDone(stack.redis, ks, [callId]);
    expect(await janusRooms(janus.apiUrl, janus.apiSecret, janus.adminKey)).toEqual([]);
  });
});
