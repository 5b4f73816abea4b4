import { randomUUID } from 'node:crypto';
import { describe, it, type ExpectStatic } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { janusRigForFile } from './mediaBrowser.js';
import type { Stack } from '../support/stack.js';
import type { Janus } from '../support/janus.js';
import type { Coturn } from '../support/coturn.js';
import { hostAddress } from '../support/coturn.js';
import { videoroomAdmin } from '../support/janusClient.js';
import { tokenFor } from '../support/tokens.js';
import { janusRoomId } from '../../src/media/janus.js';
import { sleep } from '../support/wait.js';

/**
 * Calls that outlive their media credential (issue #51), in the browser softphone (demo/) with
 * Debian's Chromium, a real server with MEDIA_CREDENTIAL_TTL_S=30, a real Janus and coturn:
 *
 * - A group call of three through Janus: 60 s in (2× the lifetime: the first two credentials have
 *   expired), every page's inbound RTP still grows from both others, each page's Janus token has
 *   been renewed by the client package's MediaSessionKeeper (demo/mediaSession.js). Then Janus
 *   is killed and started again: without a reload, every page's media comes back (the time is
 *   printed, not asserted: on a starved machine ICE and DTLS for nine peer connections take what
 *   they take; that the keeper waits the server's retry-after and no longer is
 *   test/unit/client-media-session.test.ts's). Then carol leaves: she is out of the room at once, she receives nothing more, and
 *   the other two drop her feed and keep receiving each other.
 * - A one-to-one call forced relay-only through coturn: at 40 s, once the first credential has
 *   expired, an ICE restart (after a new media session, applied with setConfiguration) gets a new
 *   relay allocation, and at 60 s both sides' inbound RTP still grows through a relay.
 *
 * The two calls run at once (the one-to-one call needs coturn only, not Janus), so the file waits
 * out the credential's lifetimes once.
 *
 * coturn relays on the host's address, where Janus's media candidates are.
 */

// Browser globals inside page.evaluate callbacks (the project compiles without the DOM library).
declare const document: { querySelectorAll(s: string): any[] };
declare const window: { softphone: { state: { call?: any }; pc?: any } };

const TURN_SECRET = 'softphone-long-call-turn-secret-51a7';
const TTL_S = 30;
const STEP_TIMEOUT_MS = 30_000;
/**
 * For media to start, and to come back after a Janus restart or an ICE restart: 2 to 9 s here, but
 * nine peer connections' ICE and DTLS on a starved 2-core CI machine have gone past 30 s.
 */
const RECOVERY_TIMEOUT_MS = 60_000;

let janus: Janus;
let coturn: Coturn;
let stack: Stack;
let browser: Browser;

janusRigForFile(TURN_SECRET, { relayIp: hostAddress(), env: { DEMO: 'true', MEDIA_CREDENTIAL_TTL_S: String(TTL_S) } }, (rig) => {
  ({ janus, coturn, stack, browser } = rig);
});

const errorsOf = new Map<Page, string[]>();

/** A page signed in as `userId` with a pasted session token; `relay` forces iceTransportPolicy relay. */
async function signedIn(userId: string, name: string, relay = false): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1180, height: 900 }, permissions: ['camera', 'microphone'] });
  const page = await context.newPage();
  page.setDefaultTimeout(STEP_TIMEOUT_MS);
  const errors: string[] = [];
  errorsOf.set(page, errors);
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${stack.url}/demo/${relay ? '?relay=1' : ''}`);
  await page.fill('#signin-token', tokenFor({ userId, installationId: `${userId}-web`, name }));
  await page.click('#signin-btn');
  await page.waitForSelector('#conn-status[data-state="online"]');
  return page;
}

/** Inbound RTP bytes a group page has from each remote participant (by the userId its tile carries). */
function groupBytes(page: Page): Promise<Record<string, number>> {
  return page.evaluate(async () => {
    const gm = window.softphone.state.call?.groupMedia;
    const out: Record<string, number> = {};
    if (!gm) return out;
    for (const { pc, tile } of gm.feeds.values()) {
      let n = 0;
      if (pc) for (const r of (await pc.getStats()).values()) if (r.type === 'inbound-rtp') n += r.bytesReceived ?? 0;
      out[tile.dataset.userId] = (out[tile.dataset.userId] ?? 0) + n;
    }
    return out;
  });
}

/**
 * `page` receives from every one of `userIds`: each one's inbound RTP grows (and nobody else's tile
 * is there). `expect` is the test's own: the two tests run at once (vitest's concurrent tests).
 */
async function receivesFrom(expect: ExpectStatic, page: Page, userIds: string[], timeout = STEP_TIMEOUT_MS): Promise<void> {
  const sorted = [...userIds].sort();
  await expect.poll(async () => Object.keys(await groupBytes(page)).sort(), { timeout }).toEqual(sorted);
  const before = await groupBytes(page);
  await expect.poll(async () => {
    const now = await groupBytes(page);
    return sorted.filter((u) => (now[u] ?? 0) > (before[u] ?? 0));
  }, { timeout }).toEqual(sorted);
}

/** The page's current media session's Janus token (renewed by the keeper). */
const tokenOf = (page: Page) => page.evaluate(() => window.softphone.state.call?.mediaKeeper?.current?.sfu?.token as string | undefined);

async function participantIds(room: number): Promise<number[]> {
  const reply = await videoroomAdmin(janus.apiUrl, janus.apiSecret, { request: 'listparticipants', room });
  return ((reply.participants as { id: number }[] | undefined) ?? []).map((p) => p.id).sort();
}

/**
 * Runs a step; when it fails, says what each page's media looked like (every peer connection's
 * connection, ICE and gathering state, the call and media state, the error and the last events
 * shown) in the error itself, so that it is among the last lines a CI run prints, and prints the
 * ends of the server's, coturn's and Janus's logs.
 */
async function explained<T>(pages: Record<string, Page>, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    const reports: string[] = [];
    for (const [id, page] of Object.entries(pages)) {
      const report = await page.evaluate(() => {
        const pcState = (pc: any) => (pc ? `${pc.connectionState}/${pc.iceConnectionState}/${pc.iceGatheringState}` : 'none');
        const gm = window.softphone.state.call?.groupMedia;
        return {
          call: window.softphone.state.call?.status,
          media: document.querySelectorAll('#media-state')[0]?.dataset.state,
          error: document.querySelectorAll('#call-error')[0]?.textContent,
          oneToOne: pcState(window.softphone.pc),
          publisher: pcState(gm?.publisherPc),
          feeds: gm ? [...gm.feeds.entries()].map(([feed, e]: [number, any]) => `${e.tile?.dataset.userId} #${feed}: ${pcState(e.pc)}`) : [],
          events: [...document.querySelectorAll('#events li')].slice(0, 8).map((li) => li.textContent),
        };
      }).catch((e: Error) => ({ unreadable: e.message }));
      reports.push(`${id}: ${JSON.stringify(report)}`);
    }
    process.stdout.write(`server's log ends:\n${stack.servers[0]!.logs().slice(-3000)}\ncoturn's log ends:\n${coturn.logs().slice(-3000)}\nJanus's log ends:\n${janus.logs().slice(-3000)}\n`);
    if (err instanceof Error) err.message += `\nthe pages at ${new Date().toISOString()}:\n${reports.join('\n')}`;
    throw err;
  }
}

/** Waits until `ms` after `t0` (a point in the call, not an assertion of absence). */
const until = (t0: number, ms: number) => sleep(Math.max(0, t0 + ms - Date.now()));

/** One-to-one: the page's peer connection's policy, state, selected pair and bytes in. */
function peerStats(page: Page) {
  return page.evaluate(async () => {
    const pc = window.softphone.pc;
    if (!pc) return undefined;
    const stats = [...(await pc.getStats()).values()] as Record<string, any>[];
    const transport = stats.find((s) => s.type === 'transport');
    const pair = stats.find((s) => s.type === 'candidate-pair' && s.id === transport?.selectedCandidatePairId);
    const local = stats.find((s) => s.id === pair?.localCandidateId);
    const remote = stats.find((s) => s.id === pair?.remoteCandidateId);
    return {
      policy: pc.getConfiguration().iceTransportPolicy as string,
      state: pc.connectionState as string,
      localType: local?.candidateType as string | undefined,
      remoteType: remote?.candidateType as string | undefined,
      local: local ? `${local.address}:${local.port}` : undefined,
      bytesReceived: stats.filter((s) => s.type === 'inbound-rtp').reduce((n, s) => n + (s.bytesReceived ?? 0), 0),
    };
  });
}

describe.concurrent('calls longer than the media credential (MEDIA_CREDENTIAL_TTL_S=30)', () => {
  it('group call through Janus: media from both others on every page at 60 s; back after a Janus restart without a reload; a member who leaves is out at once', async ({ expect }) => {
    const suffix = randomUUID().slice(0, 8);
    const [aliceId, bobId, carolId] = ['alice', 'bob', 'carol'].map((n) => `${n}-${suffix}`) as [string, string, string];
    const [alice, bob, carol] = await Promise.all([signedIn(aliceId, 'Alice'), signedIn(bobId, 'Bob'), signedIn(carolId, 'Carol')]);
    const pages = { [aliceId]: alice, [bobId]: bob, [carolId]: carol };
    const others = (id: string) => Object.keys(pages).filter((u) => u !== id);

    await alice.fill('#group-users', `${bobId}, ${carolId}`);
    await alice.click('#group-call-btn');
    for (const page of [bob, carol]) await page.waitForSelector('#call-state[data-state="incoming"]');
    const room = janusRoomId(await alice.evaluate(() => window.softphone.state.call.id as string));
    await bob.click('#answer-btn');
    await carol.click('#answer-btn');
    await explained(pages, async () => {
      for (const [id, page] of Object.entries(pages)) await receivesFrom(expect, page, others(id), RECOVERY_TIMEOUT_MS);
    });
    const t0 = Date.now();
    const firstTokens = await Promise.all([alice, bob, carol].map(tokenOf));

    // 60 s in: 2× the credential's lifetime, the first two credentials expired.
    await until(t0, 2 * TTL_S * 1000);
    await explained(pages, async () => {
      for (const [id, page] of Object.entries(pages)) {
        await receivesFrom(expect, page, others(id));
        // A live reading, every 2 s: one window on a starved machine may read 'stalled' (demo/groupMedia.js).
        await expect.poll(() => page.getAttribute('#media-state', 'data-state'), { message: id, timeout: 30_000 }).toBe('connected');
      }
    });
    const renewed = await Promise.all([alice, bob, carol].map(tokenOf));
    renewed.forEach((t, i) => expect(t).not.toBe(firstTokens[i]));

    // Janus restarts (its rooms and sessions gone): the pages reconnect on their own.
    await janus.kill();
    for (const page of [alice, bob, carol]) await page.waitForSelector('#media-state[data-state="reconnecting"]');
    await janus.start();
    const back = Date.now();
    await explained(pages, () => Promise.all(Object.entries(pages).map(([id, page]) => receivesFrom(expect, page, others(id), RECOVERY_TIMEOUT_MS))));
    process.stdout.write(`media back on all three pages ${Date.now() - back} ms after Janus answered again\n`);
    expect(await participantIds(room)).toHaveLength(3);

    // Carol leaves: out of the room once her leave is relayed; the others drop her feed and go on.
    const carolFeed = await carol.evaluate(() => window.softphone.state.call.groupMedia.o.sfu.participantId as number);
    await carol.click('#hangup-btn');
    await carol.waitForSelector('#end-reason[data-reason="localHangup"]');
    expect(await carol.evaluate(() => window.softphone.state.call.groupMedia)).toBeUndefined();
    expect(await groupBytes(carol)).toEqual({});
    await expect.poll(() => participantIds(room)).not.toContain(carolFeed);
    await explained(pages, async () => {
      await receivesFrom(expect, alice, [bobId]);
      await receivesFrom(expect, bob, [aliceId]);
    });

    await alice.click('#end-all-btn');
    for (const page of [alice, bob]) await page.waitForSelector('#call-state[data-state="ended"]');
    for (const page of [alice, bob, carol]) expect(errorsOf.get(page)).toEqual([]);
    await Promise.all([alice, bob, carol].map((p) => p.context().close()));
  }, 420_000);

  it('one-to-one relay-only through coturn: an ICE restart at 40 s gets a new relay allocation; media both ways at 60 s', async ({ expect }) => {
    const suffix = randomUUID().slice(0, 8);
    const bobId = `bob-${suffix}`;
    const [alice, bob] = await Promise.all([signedIn(`alice-${suffix}`, 'Alice', true), signedIn(bobId, 'Bob', true)]);
    await alice.fill('#callee', bobId);
    await alice.click('#call-btn');
    await bob.waitForSelector('#call-state[data-state="incoming"]');
    await bob.click('#answer-btn');
    await explained({ alice, bob }, () => Promise.all([alice, bob].map((p) => p.waitForSelector('#call-state[data-state="connected"]', { timeout: RECOVERY_TIMEOUT_MS }))));
    const t0 = Date.now();
    for (const page of [alice, bob]) {
      await expect.poll(() => peerStats(page)).toMatchObject({ policy: 'relay', state: 'connected', localType: 'relay', remoteType: 'relay' });
    }

    // 40 s in (the first credential expired 10 s ago): the allocation made with it still relays;
    // an ICE restart gathers again, with the new media session's credentials.
    await until(t0, (4 / 3) * TTL_S * 1000);
    const before = (await peerStats(alice))!;
    expect(before).toMatchObject({ state: 'connected', localType: 'relay' });
    const iceServersBefore = await alice.evaluate(() => JSON.stringify(window.softphone.pc.getConfiguration().iceServers));
    await alice.evaluate(() => window.softphone.state.call.media.restartIce());
    const iceServersAfter = await alice.evaluate(() => JSON.stringify(window.softphone.pc.getConfiguration().iceServers));
    expect(iceServersAfter).not.toBe(iceServersBefore);
    await explained({ alice, bob }, () =>
      expect
        .poll(async () => {
          const s = (await peerStats(alice))!;
          return s.state === 'connected' && s.localType === 'relay' && s.local !== before.local;
        }, { timeout: RECOVERY_TIMEOUT_MS })
        .toBe(true),
    );

    // 60 s in: both sides receive, through a relay.
    await until(t0, 2 * TTL_S * 1000);
    for (const page of [alice, bob]) {
      const s = (await peerStats(page))!;
      expect(s).toMatchObject({ policy: 'relay', state: 'connected', localType: 'relay' });
      await expect.poll(async () => (await peerStats(page))!.bytesReceived).toBeGreaterThan(s.bytesReceived);
    }
    await alice.click('#hangup-btn');
    for (const page of [alice, bob]) expect(errorsOf.get(page)).toEqual([]);
    await Promise.all([alice, bob].map((p) => p.context().close()));
  }, 240_000);
});
