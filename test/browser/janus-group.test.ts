import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { janusRigForFile } from './mediaBrowser.js';
import { janusPeerInPage, type JanusPeer } from './janusPeer.js';
import type { Stack } from '../support/stack.js';
import type { Janus } from '../support/janus.js';
import { hostAddress } from '../support/coturn.js';
import { answer, end, expectJson, relayDone, type Device } from '../support/fixtures.js';
import { endForAll, groupCall } from '../support/groupCall.js';
import { janusRooms, joinRoom } from '../support/janusClient.js';
import { waitUntil } from '../support/wait.js';
import { janusRoomId } from '../../src/media/janus.js';

/**
 * A group call of three through Janus in three Chromium pages (docs/group-calls.md "Media"), on a
 * server whose one-to-one calls stay `p2p`: alice calls bob and carol; bob joins, alice's and
 * bob's pages enter the call's room; then carol joins, her page relay-only (iceTransportPolicy
 * `relay`, through the test coturn). Each page receives both others' media (inbound RTP bytes
 * growing per feed). Carol leaves the call: the backend kicks her from the room, alice and bob
 * stop receiving her and keep receiving each other, she stops receiving them, and her credential
 * no longer opens the room
 * (Janus answers). When the call ends, Janus lists no room for it. Five runs; each measures the
 * time from carol's join (her answer request) to the first decoded frame of her video on each of
 * the others (printed, and written to test-artifacts/janus-group-timings.json; docs/performance.md
 * "Group media through Janus" states it). ICE between the pages and Janus runs on the host address (libnice
 * offers no loopback candidates).
 */

declare const globalThis: { janusPeer: JanusPeer };

const TURN_SECRET = 'janus-group-browser-turn-secret-52e1';
const RUNS = 5;
/** Bytes each remaining page must receive of the other after carol's kick (a second or so of video). */
const MIN_GROWTH = 20_000;
const ks = { prefix: 'cb', shards: 8 };
const REPO_ROOT = join(import.meta.dirname, '..', '..');

let janus: Janus;
let stack: Stack;
let browser: Browser;

janusRigForFile(TURN_SECRET, { relayIp: hostAddress() }, (rig) => {
  ({ janus, stack, browser } = rig);
});

interface Seat {
  display: string;
  page: Page;
  context: BrowserContext;
  participantId: number;
  token: string;
}

/** A page on the server's origin (127.0.0.1: a secure context for getUserMedia), ready to enter. */
async function openPage(): Promise<{ page: Page; context: BrowserContext }> {
  const context = await browser.newContext({ permissions: ['camera', 'microphone'] });
  const page = await context.newPage();
  // esbuild's keepNames helper, which the serialised function may call.
  await page.addInitScript('globalThis.__name = (f) => f;');
  await page.goto(`${stack.url}/healthz`);
  return { page, context };
}

/** Takes the installation's media session and enters the call's room from `page`. */
async function enter(d: Device, callId: string, opened: { page: Page; context: BrowserContext }, display: string, relayOnly = false): Promise<Seat> {
  const res = await d.api.post(`/v1/calls/${callId}/media-session`, {});
  expectJson(res, 200);
  const { sfu, iceServers } = res.json;
  expect(sfu.room).toBe(janusRoomId(callId));
  await opened.page.evaluate(janusPeerInPage, { url: sfu.url, room: sfu.room, token: sfu.token, participantId: sfu.participantId, iceServers, display, relayOnly });
  return { ...opened, display, participantId: sfu.participantId, token: sfu.token };
}

const feedBytes = (s: Seat) => s.page.evaluate(() => globalThis.janusPeer.feedBytes());

async function diagnostics(s: Seat): Promise<string> {
  const [errors, states] = await s.page.evaluate(() => [globalThis.janusPeer.errors, globalThis.janusPeer.states()]);
  const [bytes, candidates] = await Promise.all([feedBytes(s), s.page.evaluate(() => globalThis.janusPeer.localCandidateTypes())]);
  return `${s.display}: page errors: ${JSON.stringify(errors)}, peer connections: ${JSON.stringify(states)} (local candidates ${JSON.stringify(candidates)}), bytes per feed: ${JSON.stringify(bytes)}\n${janus
    .logs()
    .split('\n')
    .filter((l) => /ice|dtls|fail|err|warn|hangup/i.test(l))
    .slice(-30)
    .join('\n')}`;
}

/** Waits until `s` receives growing media from each of `from`. */
async function receives(s: Seat, from: Seat[]): Promise<void> {
  for (const other of from) {
    const feed = other.participantId;
    const bytes = async () => (await feedBytes(s))[feed] ?? 0;
    await waitUntil(`inbound RTP bytes from feed ${feed}`, async () => (await bytes()) > 0, 30_000, { detail: () => diagnostics(s) });
    const first = await bytes();
    await waitUntil(`inbound RTP bytes from feed ${feed} growing`, async () => (await bytes()) > first, 20_000, { detail: () => diagnostics(s) });
  }
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

describe('a group call of three through Janus in Chromium', () => {
  it('each page receives the two others (one page relay-only through coturn); the one who leaves is kicked and refused; the room goes with the call', async () => {
    const joinToFrameMs: number[] = [];
    /** Per sample, ms from the join: carol's publisher connected, her feed announced to the page, its subscription connected, first frame. */
    const steps: Record<'published' | 'announced' | 'connected' | 'frame', number>[] = [];
    for (let run = 0; run < RUNS; run++) {
      const { callId, caller, members } = await groupCall(stack.url, 2);
      const [bob, carol] = members as [Device, Device];
      const pages = await Promise.all([openPage(), openPage(), openPage()]);
      try {
        expectJson(await answer(bob, callId), 200);
        const [a, b] = await Promise.all([enter(caller, callId, pages[0]!, 'Alice'), enter(bob, callId, pages[1]!, 'Bob')]);
        await Promise.all([receives(a, [b]), receives(b, [a])]);

        // Carol joins a call in progress: from her answer to her first frame on each other page.
        const joinedAtMs = Date.now();
        expectJson(await answer(carol, callId), 200);
        const c = await enter(carol, callId, pages[2]!, 'Carol', true);
        await Promise.all([receives(a, [b, c]), receives(b, [a, c]), receives(c, [a, b])]);
        const publishedAtMs = await c.page.evaluate(() => globalThis.janusPeer.publishedAtMs);
        for (const s of [a, b]) {
          // Audio bytes may flow before the first video frame is decoded.
          await waitUntil('a decoded frame of carol’s video', () => s.page.evaluate((feed) => globalThis.janusPeer.firstFrameAtMs[feed] !== undefined, c.participantId), 20_000, {
            detail: () => diagnostics(s),
          });
          const at = await s.page.evaluate((feed) => {
            const p = globalThis.janusPeer;
            return { announced: p.announcedAtMs[feed]!, connected: p.connectedAtMs[feed]!, frame: p.firstFrameAtMs[feed]! };
          }, c.participantId);
          expect(at.frame, 'first frame of carol decoded').toBeGreaterThan(joinedAtMs);
          joinToFrameMs.push(at.frame - joinedAtMs);
          steps.push({ published: publishedAtMs! - joinedAtMs, announced: at.announced - joinedAtMs, connected: at.connected - joinedAtMs, frame: at.frame - joinedAtMs });
        }
        // Relay-only: every candidate pair carol's page uses goes through coturn.
        expect(await c.page.evaluate(() => globalThis.janusPeer.localCandidateTypes())).toEqual(['relay', 'relay', 'relay']);

        // Carol leaves: kicked from the room; the others stop receiving her and keep receiving each other.
        expectJson(await end(carol, callId, 'localHangup'), 200);
        await relayDone(stack.redis, ks, [callId]);
        for (const s of [a, b]) {
          await waitUntil('carol’s feed gone', () => s.page.evaluate((feed) => globalThis.janusPeer.gone.includes(feed), c.participantId), 10_000, { detail: () => diagnostics(s) });
        }
        await waitUntil('carol’s page kicked', () => c.page.evaluate(() => globalThis.janusPeer.kicked), 10_000, { detail: () => diagnostics(c) });
        // Packets Janus forwarded before the kick may still be in flight (through coturn for carol)
        // or not yet in the stats: the reading starts once carol's counts stand still for a
        // second. A Janus that kept forwarding her never stands still, and fails here.
        let last = '';
        let stillSinceMs = Date.now();
        const carolsCounts = async () => {
          const [toA, toB, toC] = await Promise.all([a, b, c].map(feedBytes));
          return JSON.stringify([toA![c.participantId], toB![c.participantId], toC]);
        };
        await waitUntil('carol’s byte counts standing still for a second', async () => {
          const now = await carolsCounts();
          if (now !== last) [last, stillSinceMs] = [now, Date.now()];
          return Date.now() - stillSinceMs >= 1000;
        }, 15_000, { intervalMs: 200, detail: async () => `last counts ${last}\n${await diagnostics(a)}\n${await diagnostics(b)}` });
        const before = await Promise.all([a, b, c].map(feedBytes));
        // Alice and bob keep receiving each other: a window in which each got at least
        // MIN_GROWTH more bytes of the other (not a fixed sleep: a loaded machine may pause a feed).
        const grew = (now: Record<number, number>[]) =>
          now[0]![b.participantId]! - before[0]![b.participantId]! >= MIN_GROWTH && now[1]![a.participantId]! - before[1]![a.participantId]! >= MIN_GROWTH;
        await waitUntil('alice and bob still receive each other', async () => grew(await Promise.all([a, b].map(feedBytes))), 20_000, {
          detail: async () => `${await diagnostics(a)}\n${await diagnostics(b)}`,
        });
        const after = await Promise.all([a, b, c].map(feedBytes));
        // In that window nothing more came from carol, and carol received nothing: her
        // subscriptions went with her publisher (the room requires private_id).
        for (const i of [0, 1]) expect(after[i]![c.participantId], 'bytes from carol after her kick').toBe(before[i]![c.participantId]);
        expect(after[2], 'bytes carol receives after her kick').toEqual(before[2]);
        // Her credential no longer opens the room.
        expect(await joinRoom(janus.apiUrl, janusRoomId(callId), c.token, c.participantId)).toMatchObject({ joined: false, stage: 'join', code: 433 });
        for (const s of [a, b, c]) expect(await s.page.evaluate(() => globalThis.janusPeer.errors)).toEqual([]);

        expectJson(await endForAll(caller, callId), 200);
        await relayDone(stack.redis, ks, [callId]);
        expect((await janusRooms(janus.apiUrl, janus.apiSecret, janus.adminKey)).filter((r) => r === janusRoomId(callId))).toEqual([]);
      } finally {
        await Promise.all(pages.map((p) => p.context.close()));
      }
    }
    const sorted = [...joinToFrameMs].sort((x, y) => x - y);
    const median = (k: keyof (typeof steps)[number]) => percentile(steps.map((x) => x[k]).sort((x, y) => x - y), 50);
    const figures = {
      runs: RUNS,
      samples: sorted.length,
      p50Ms: percentile(sorted, 50),
      p95Ms: percentile(sorted, 95),
      minMs: sorted[0],
      maxMs: sorted.at(-1),
      medianStepsMs: { published: median('published'), announced: median('announced'), connected: median('connected'), frame: median('frame') },
      samplesMs: joinToFrameMs,
    };
    console.log(`group join -> first decoded frame at the others: ${JSON.stringify(figures)}`);
    mkdirSync(join(REPO_ROOT, 'test-artifacts'), { recursive: true });
    writeFileSync(join(REPO_ROOT, 'test-artifacts', 'janus-group-timings.json'), `${JSON.stringify(figures, null, 2)}\n`);
  }, 300_000);
});
