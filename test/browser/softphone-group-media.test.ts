import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { janusRigForFile } from './mediaBrowser.js';
import type { Stack } from '../support/stack.js';
import type { Janus } from '../support/janus.js';
import { janusRooms, videoroomAdmin } from '../support/janusClient.js';
import { tokenFor } from '../support/tokens.js';
import { REPO_ROOT } from '../support/server.js';
import { api } from '../support/http.js';
import { newServerKey } from '../../src/auth/serverKeys.js';
import { janusRoomId } from '../../src/media/janus.js';

/**
 * The browser softphone's group media (docs/development.md "Browser softphone"; demo/groupMedia.js)
 * in Debian's Chromium with fake camera and microphone, against a real server process (DEMO=true,
 * signed in by pasting session tokens), a real Redis, coturn and a real Janus: alice calls bob and
 * carol; as each joins, every page in the call shows one playing video tile per other participant,
 * labelled with its userId; carol leaves, her page tears its media down and the other two drop her
 * tile; she is rung again and rejoins, then the server API removes her (Janus kicks her) and her
 * tile goes again (bob's first subscription to her rejoined feed is refused once, and made again);
 * alice ends the call for all and every tile goes. The page's CSP allows the Janus WebSocket
 * and nothing else besides the page's own server. The three pages in the call are screenshotted
 * into test-artifacts/.
 */

// Browser globals inside page.evaluate callbacks (the project compiles without the DOM library).
declare const document: { querySelectorAll(s: string): any[] };
declare const window: { softphone: { state: { call?: { id: string; groupMedia?: unknown } } } };

const TURN_SECRET = 'softphone-group-media-turn-secret-9c4d';
const STEP_TIMEOUT_MS = 30_000;
const artifacts = join(REPO_ROOT, 'test-artifacts', `softphone-group-media-${new Date().toISOString().replace(/[:.]/g, '-')}`);

let janus: Janus;
let stack: Stack;
let browser: Browser;

const serverKey = newServerKey();

janusRigForFile(TURN_SECRET, { env: { DEMO: 'true', SERVER_API_KEYS: serverKey.hash } }, (rig) => {
  ({ janus, stack, browser } = rig);
});

const errorsOf = new Map<Page, string[]>();

/** A page signed in as `userId` with a session token pasted in (the server runs without --dev). */
async function signedIn(userId: string, name: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1180, height: 900 }, permissions: ['camera', 'microphone'] });
  const page = await context.newPage();
  page.setDefaultTimeout(STEP_TIMEOUT_MS);
  const errors: string[] = [];
  errorsOf.set(page, errors);
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${stack.url}/demo/`);
  await page.fill('#signin-token', tokenFor({ userId, installationId: `${userId}-web`, name }));
  await page.click('#signin-btn');
  await page.waitForSelector('#conn-status[data-state="online"]');
  return page;
}

/** The remote tiles a page shows: the userId each is labelled with, its caption, and its video's size and time. */
function tiles(page: Page) {
  return page.evaluate(() =>
    [...document.querySelectorAll('#tiles .tile')].map((t) => {
      const v = t.querySelector('video');
      return { userId: t.dataset.userId as string, caption: t.querySelector('figcaption').textContent as string, width: v.videoWidth as number, time: v.currentTime as number };
    }),
  );
}

/** `page` shows exactly one tile per user of `userIds`, each labelled with it, each video playing (frames in, time advancing). */
async function showsPlaying(page: Page, userIds: string[]): Promise<void> {
  const sorted = [...userIds].sort();
  await expect.poll(async () => (await tiles(page)).map((t) => t.userId).sort(), { timeout: STEP_TIMEOUT_MS }).toEqual(sorted);
  await expect.poll(async () => (await tiles(page)).every((t) => t.width > 0), { timeout: STEP_TIMEOUT_MS }).toBe(true);
  const before = await tiles(page);
  await expect
    .poll(async () => (await tiles(page)).every((t) => t.time > before.find((b) => b.userId === t.userId)!.time), { timeout: STEP_TIMEOUT_MS })
    .toBe(true);
  expect((await tiles(page)).map((t) => t.caption).sort()).toEqual(sorted);
}

async function participantsInRoom(room: number): Promise<number> {
  const reply = await videoroomAdmin(janus.apiUrl, janus.apiSecret, { request: 'listparticipants', room });
  return (reply.participants as unknown[] | undefined)?.length ?? 0;
}

describe('softphone group media through Janus', () => {
  it('three pages: a playing tile per remote participant, labelled; carol leaves, rejoins, is removed, and her tile goes each time; end for all tears it down', async () => {
    const suffix = randomUUID().slice(0, 8);
    const [aliceId, bobId, carolId] = ['alice', 'bob', 'carol'].map((n) => `${n}-${suffix}`) as [string, string, string];
    const [alice, bob, carol] = await Promise.all([signedIn(aliceId, 'Alice'), signedIn(bobId, 'Bob'), signedIn(carolId, 'Carol')]);
    const csp = (await (await fetch(`${stack.url}/demo/`)).headers.get('content-security-policy')) ?? '';
    expect(csp).toContain(`connect-src 'self' ${new URL(janus.wsUrl).origin};`);

    await alice.fill('#group-users', `${bobId}, ${carolId}`);
    await alice.click('#group-call-btn');
    for (const page of [bob, carol]) await page.waitForSelector('#call-state[data-state="incoming"]');
    const room = janusRoomId(await alice.evaluate(() => window.softphone.state.call!.id));

    await bob.click('#answer-btn');
    await showsPlaying(alice, [bobId]);
    await showsPlaying(bob, [aliceId]);

    await carol.click('#answer-btn');
    await showsPlaying(alice, [bobId, carolId]);
    await showsPlaying(bob, [aliceId, carolId]);
    await showsPlaying(carol, [aliceId, bobId]);
    expect(await participantsInRoom(room)).toBe(3);
    // The media state is a live reading, taken every 2 s (demo/groupMedia.js): on a starved machine one
    // window can see a feed's bytes stand still ('stalled'), so each page is asked to reach 'connected'.
    for (const page of [alice, bob, carol]) await expect.poll(() => page.getAttribute('#media-state', 'data-state'), { timeout: STEP_TIMEOUT_MS }).toBe('connected');
    mkdirSync(artifacts, { recursive: true });
    for (const [name, page] of [['alice', alice], ['bob', bob], ['carol', carol]] as const) await page.screenshot({ path: join(artifacts, `three-in-call-${name}.png`) });

    // Carol leaves: her page leaves the room; the others drop her tile and keep each other's.
    await carol.click('#hangup-btn');
    await carol.waitForSelector('#end-reason[data-reason="localHangup"]');
    expect(await tiles(carol)).toEqual([]);
    expect(await carol.evaluate(() => window.softphone.state.call!.groupMedia)).toBeUndefined();
    await showsPlaying(alice, [bobId]);
    await showsPlaying(bob, [aliceId]);
    await expect.poll(() => participantsInRoom(room)).toBe(2);

    // Bob rings carol again; she joins with a new credential and the tiles come back. Then the
    // app's backend removes her (server API): Janus kicks her, the others drop her tile again.
    await bob.fill('#invite-users', carolId);
    await bob.click('#invite-btn');
    await carol.waitForSelector('#call-state[data-state="incoming"]');
    // A subscription that fails is made again a second later (demo/groupMedia.js): Janus refuses
    // bob's next subscriber join once, as it would a join that raced a restart.
    await bob.evaluate(() => {
      const gm = window.softphone.state.call!.groupMedia as any;
      const message = gm.message.bind(gm);
      const w = window as any;
      w.refusedJoins = 0;
      gm.message = (handle: number, body: any, jsep?: unknown) => {
        if (w.refusedJoins === 0 && body.request === 'join' && body.ptype === 'subscriber') {
          w.refusedJoins++;
          return Promise.reject(new Error('SFU: refused once by the test'));
        }
        return message(handle, body, jsep);
      };
    });
    await carol.click('#answer-btn');
    await showsPlaying(alice, [bobId, carolId]);
    await showsPlaying(bob, [aliceId, carolId]);
    await showsPlaying(carol, [aliceId, bobId]);
    expect(await bob.evaluate(() => (window as any).refusedJoins)).toBe(1);
    const callId = await alice.evaluate(() => window.softphone.state.call!.id);
    const removed = await api(stack.url, serverKey.key).del(`/v1/server/calls/${callId}/participants/${encodeURIComponent(carolId)}`);
    expect(removed.status).toBe(200);
    await carol.waitForSelector('#end-reason[data-reason="remoteEnded"]');
    expect(await tiles(carol)).toEqual([]);
    await showsPlaying(alice, [bobId]);
    await showsPlaying(bob, [aliceId]);
    await expect.poll(() => participantsInRoom(room)).toBe(2);

    await alice.click('#end-all-btn');
    for (const page of [alice, bob]) {
      await page.waitForSelector('#call-state[data-state="ended"]');
      expect(await tiles(page)).toEqual([]);
    }
    await expect.poll(async () => (await janusRooms(janus.apiUrl, janus.apiSecret, janus.adminKey)).includes(room)).toBe(false);
    for (const page of [alice, bob, carol]) {
      expect(await page.textContent('#call-error')).toBe('');
      expect(errorsOf.get(page)).toEqual([]);
    }
    await Promise.all([alice, bob, carol].map((p) => p.context().close()));
  }, 180_000);
});
