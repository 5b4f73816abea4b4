import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchMediaBrowser } from './mediaBrowser.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { REPO_ROOT, startServer, type TestServer } from '../support/server.js';
import { startCoturn, type Coturn } from '../support/coturn.js';
import { sleep } from '../support/wait.js';

/**
 * The browser softphone (docs/development.md "Browser softphone") in Debian's Chromium, driven by
 * playwright-core, against real server processes (DEMO=true, --dev), a real Redis and a real
 * coturn: alice and bob, each in a browser context of their own, call, ring, answer, connect
 * WebRTC media through the TURN relay only (iceTransportPolicy 'relay', so a connection proves
 * coturn accepted the media-session credentials), hang up, decline, cancel and ring out, and each
 * side shows its end reason; and a group call among three pages (signaling only: this server has no
 * SFU; softphone-group-media.test.ts has the media through Janus). Every step is screenshotted into
 * test-artifacts/ (path printed).
 */

// Browser globals inside page.evaluate callbacks (the project compiles without the DOM library).
declare const window: {
  softphone: { pc?: any; state: { signaling: { stop(): void }; call?: { id: string }; api: { messagesAfter(callId: string, after: number): Promise<{ messages: unknown[] }> } } };
};
declare const document: { getElementById(id: string): any };

const TURN_SECRET = 'browser-turn-secret-2b7e151628aed2a6';
const STEP_TIMEOUT_MS = 30_000;

let redis: RedisServer;
let coturn: Coturn;
let server: TestServer;
/**
 * Same Redis, a ring window of 10 s: for the calls that ring out. Long enough for what a test does
 * while one rings (two screenshots, a click) on a starved machine: at 4 s a loaded run once saw
 * the call ring out before the callee's click.
 */
let shortRing: TestServer;
let browser: Browser;
const artifacts = join(REPO_ROOT, 'test-artifacts', `softphone-${new Date().toISOString().replace(/[:.]/g, '-')}`);
let step = 0;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  mkdirSync(artifacts, { recursive: true });
  [redis, coturn] = await Promise.all([startRedis(), startCoturn(TURN_SECRET)]);
  const env = { REDIS_URL: redis.url, DEMO: 'true', TURN_URLS: coturn.url, TURN_SECRET };
  [server, shortRing] = await Promise.all([
    startServer({ ...env, RING_TIMEOUT_MS: '45000' }, { args: ['--dev'] }),
    startServer({ ...env, RING_TIMEOUT_MS: '10000' }, { args: ['--dev'] }),
  ]);
  // Playwright starts Chromium with a fresh temporary --user-data-dir of its own.
  browser = await launchMediaBrowser();
}, 90_000);

afterEach(async () => {
  await Promise.all(contexts.splice(0).map((c) => c.close().catch(() => {})));
});

afterAll(async () => {
  await browser?.close();
  await Promise.all([server?.stop(), shortRing?.stop()]);
  await Promise.all([redis?.stop(), coturn?.stop()]);
  console.log(`softphone screenshots: ${artifacts}`);
});

async function shot(page: Page, name: string): Promise<void> {
  step++;
  await page.screenshot({ path: join(artifacts, `${String(step).padStart(2, '0')}-${name}.png`) });
}

/** The HTTP requests each page made, by method and path. */
const requestsOf = new Map<Page, string[]>();
/** The uncaught errors of each page's scripts. */
const errorsOf = new Map<Page, string[]>();

/** A fresh browser context (its own storage, camera and microphone allowed) signed in as `userId`. */
async function signedIn(baseUrl: string, userId: string, name: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1180, height: 760 }, permissions: ['camera', 'microphone'] });
  contexts.push(context);
  const page = await context.newPage();
  page.setDefaultTimeout(STEP_TIMEOUT_MS);
  const errors: string[] = [];
  errorsOf.set(page, errors);
  page.on('pageerror', (e) => errors.push(e.message));
  const requests: string[] = [];
  requestsOf.set(page, requests);
  page.on('request', (r) => requests.push(`${r.method()} ${new URL(r.url()).pathname}`));
  await page.goto(`${baseUrl}/demo/?relay=1`);
  await page.fill('#signin-user', userId);
  await page.fill('#signin-name', name);
  await page.click('#signin-btn');
  try {
    await page.waitForSelector('#conn-status[data-state="online"]');
  } catch (err) {
    // Say what the page showed. Under load a click on Sign in once came before the page had taken
    // the form over, and submitting it reloaded the page (demo/app.js now takes it over at once).
    const shown = await page.evaluate(() => ({
      signinError: document.getElementById('signin-error')?.textContent as string | undefined,
      status: document.getElementById('conn-status')?.dataset?.state as string | undefined,
      log: (document.getElementById('events')?.textContent as string | undefined)?.slice(-2000),
    }));
    throw new Error(`${userId} not online: ${JSON.stringify({ ...shown, errors, requests })}`, { cause: err });
  }
  expect(errors).toEqual([]);
  return page;
}

async function users(baseUrl: string): Promise<{ alice: Page; bob: Page; bobId: string }> {
  const suffix = randomUUID().slice(0, 8);
  const bobId = `bob-${suffix}`;
  const [alice, bob] = await Promise.all([signedIn(baseUrl, `alice-${suffix}`, 'Alice'), signedIn(baseUrl, bobId, 'Bob')]);
  return { alice, bob, bobId };
}

async function dial(alice: Page, bob: Page, bobId: string, label: string): Promise<void> {
  await alice.fill('#callee', bobId);
  await alice.click('#call-btn');
  await alice.waitForSelector('#call-state[data-state="outgoing"]');
  await bob.waitForSelector('#call-state[data-state="incoming"]');
  await expect.poll(() => bob.textContent('#call-peer')).toContain('Alice');
  await shot(alice, `${label}-alice-calling`);
  await shot(bob, `${label}-bob-ringing`);
}

async function endReason(page: Page, reason: string): Promise<void> {
  await page.waitForSelector(`#end-reason[data-reason="${reason}"]`);
  expect(await page.isVisible('#end-reason')).toBe(true);
}

/** A page and the end it must show: its reason and, when given, a text of its end line. */
type ShownEnd = [page: Page, reason: string, text?: string];

/** Alice's and Bob's pages show their ends; then a screenshot of each, `<label>-alice` and `<label>-bob`. */
async function expectEnds(label: string, alice: ShownEnd, bob: ShownEnd): Promise<void> {
  for (const [page, reason, text] of [alice, bob]) {
    await endReason(page, reason);
    if (text !== undefined) expect(await page.textContent('#end-reason')).toContain(text);
  }
  await shot(alice[0], `${label}-alice`);
  await shot(bob[0], `${label}-bob`);
}

/** What the page's RTCPeerConnection says about itself: policy, state, the selected pair, bytes in. */
function peerStats(page: Page) {
  return page.evaluate(async () => {
    const pc = window.softphone.pc;
    if (!pc) return undefined;
    const stats = [...(await pc.getStats()).values()] as Record<string, any>[];
    const transport = stats.find((s) => s.type === 'transport');
    const pair = stats.find((s) => s.type === 'candidate-pair' && s.id === transport?.selectedCandidatePairId);
    const local = stats.find((s) => s.id === pair?.localCandidateId);
    const remote = stats.find((s) => s.id === pair?.remoteCandidateId);
    const inbound = stats.filter((s) => s.type === 'inbound-rtp');
    return {
      policy: pc.getConfiguration().iceTransportPolicy,
      state: pc.connectionState,
      localType: local?.candidateType as string | undefined,
      remoteType: remote?.candidateType as string | undefined,
      bytesReceived: inbound.reduce((n, s) => n + (s.bytesReceived ?? 0), 0),
      kinds: inbound.map((s) => s.kind as string).sort(),
    };
  });
}

describe('browser softphone', () => {
  it('a Sign in click before the page has its configuration waits for it and signs in, without reloading the page', async () => {
    const context = await browser.newContext({ permissions: ['camera', 'microphone'] });
    contexts.push(context);
    const page = await context.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT_MS);
    const documents: string[] = [];
    page.on('request', (r) => r.resourceType() === 'document' && documents.push(r.url()));
    // The configuration answers 2 s late: the click below comes before it.
    await page.route('**/demo-api/config', async (route) => {
      await sleep(2000);
      await route.continue();
    });
    await page.goto(`${server.url}/demo/`, { waitUntil: 'domcontentloaded' });
    await page.fill('#signin-user', `early-${randomUUID().slice(0, 8)}`);
    await page.click('#signin-btn');
    await page.waitForSelector('#conn-status[data-state="online"]');
    expect(documents).toHaveLength(1);
  });

  it('call → ring → answer → WebRTC connected through the TURN relay → hang up; each side shows its end reason', async () => {
    const { alice, bob, bobId } = await users(server.url);
    await shot(alice, 'alice-signed-in');
    await shot(bob, 'bob-signed-in');
    await dial(alice, bob, bobId, 'call');

    await bob.click('#answer-btn');
    await Promise.all([
      alice.waitForSelector('#call-state[data-state="connected"]', { timeout: 45_000 }),
      bob.waitForSelector('#call-state[data-state="connected"]', { timeout: 45_000 }),
    ]);
    for (const page of [alice, bob]) {
      // Media flowed through coturn: relay-only policy, relay candidates selected, audio and video in.
      await expect.poll(async () => (await peerStats(page))?.bytesReceived ?? 0, { timeout: 20_000 }).toBeGreaterThan(10_000);
      const s = await peerStats(page);
      expect(s).toMatchObject({ policy: 'relay', state: 'connected', localType: 'relay', remoteType: 'relay', kinds: ['audio', 'video'] });
      await expect.poll(() => page.evaluate(() => document.getElementById('remote-video').videoWidth as number)).toBeGreaterThan(0);
      await expect.poll(() => page.getAttribute('#media-state', 'data-state')).toBe('connected');
    }
    await shot(alice, 'call-alice-connected');
    await shot(bob, 'call-bob-connected');
    // The offer, the answer and the ICE candidates went through the in-call messages, sent as
    // frames on the signaling socket (docs/signaling.md "Commands"), as was the answer.
    const metrics = await (await fetch(`${server.metricsUrl}/metrics`)).text();
    expect(Number(/^calling_ws_messages_sent_total (\d+)/m.exec(metrics)?.[1] ?? 0)).toBeGreaterThanOrEqual(4);
    expect(Number(/^calling_ws_commands_total\{command="message",status="200"\} (\d+)/m.exec(metrics)?.[1] ?? 0)).toBeGreaterThanOrEqual(4);
    expect(Number(/^calling_ws_commands_total\{command="answer",status="200"\} (\d+)/m.exec(metrics)?.[1] ?? 0)).toBeGreaterThanOrEqual(1);

    await alice.click('#hangup-btn');
    await endReason(alice, 'localHangup');
    await endReason(bob, 'remoteEnded');
    const commandRequests = [alice, bob].flatMap((p) => requestsOf.get(p)!.filter((r) => /^POST \/v1\/calls\/[^/]+\/(answer|end|messages)$/.test(r)));
    expect(commandRequests).toEqual([]);
    expect(await alice.textContent('#end-reason')).toContain('You ended the call');
    expect(await bob.textContent('#end-reason')).toContain('Alice hung up');
    expect(await alice.evaluate(() => window.softphone.pc === undefined)).toBe(true);
    await shot(alice, 'call-alice-hung-up');
    await shot(bob, 'call-bob-remote-ended');
  }, 150_000);

  it("move: Bob's second page takes the accepted call from his first; media flows to it, the first shows movedElsewhere", async () => {
    const { alice, bob, bobId } = await users(server.url);
    const bobTablet = await signedIn(server.url, bobId, 'Bob');
    await dial(alice, bob, bobId, 'move');
    await bobTablet.waitForSelector('#call-state[data-state="incoming"]');
    await bob.click('#answer-btn');
    await Promise.all([alice, bob].map((p) => p.waitForSelector('#call-state[data-state="connected"]', { timeout: 45_000 })));
    await endReason(bobTablet, 'answeredElsewhere');
    await shot(bobTablet, 'move-tablet-answered-elsewhere');

    // The tablet takes the call: the phone's call ends as moved, Alice connects anew to the tablet.
    await alice.evaluate(() => ((window as any).pcBeforeMove = window.softphone.pc));
    await bobTablet.click('#move-btn');
    await endReason(bob, 'movedElsewhere');
    expect(await bob.textContent('#end-reason')).toContain('Moved to another device');
    expect(await bob.evaluate(() => window.softphone.pc === undefined)).toBe(true);
    await Promise.all([alice, bobTablet].map((p) => p.waitForSelector('#call-state[data-state="connected"]', { timeout: 45_000 })));
    for (const page of [alice, bobTablet]) {
      await expect.poll(async () => (await peerStats(page))?.bytesReceived ?? 0, { timeout: 20_000 }).toBeGreaterThan(10_000);
      expect(await peerStats(page)).toMatchObject({ policy: 'relay', state: 'connected', localType: 'relay', remoteType: 'relay', kinds: ['audio', 'video'] });
    }
    // Alice's media is a new peer connection, with the tablet; the one with the phone is closed.
    expect(await alice.evaluate(() => window.softphone.pc !== (window as any).pcBeforeMove && (window as any).pcBeforeMove.connectionState === 'closed')).toBe(true);
    await shot(alice, 'move-alice-connected-to-tablet');
    await shot(bobTablet, 'move-tablet-connected');
    await shot(bob, 'move-phone-moved-elsewhere');

    // The call is one call throughout: the tablet hangs up and Alice sees Bob hang up.
    await bobTablet.click('#hangup-btn');
    await endReason(bobTablet, 'localHangup');
    await endReason(alice, 'remoteEnded');
    for (const page of [alice, bob, bobTablet]) expect(errorsOf.get(page)).toEqual([]);
  }, 150_000);

  it('decline: the callee declines; both sides show declined', async () => {
    const { alice, bob, bobId } = await users(server.url);
    await dial(alice, bob, bobId, 'decline');
    await bob.click('#decline-btn');
    await expectEnds('decline', [alice, 'declined', `${bobId} declined`], [bob, 'declined', 'You declined']);
  }, 90_000);

  it('block caller: the callee blocks the ringing caller; the next call rings out for the caller and never rings the callee', async () => {
    const suffix = randomUUID().slice(0, 8);
    const bobId = `bob-${suffix}`;
    // On the short ring window's server, so that the blocked call rings out soon.
    const [alice, bob] = await Promise.all([signedIn(shortRing.url, `alice-${suffix}`, 'Alice'), signedIn(shortRing.url, bobId, 'Bob')]);
    await dial(alice, bob, bobId, 'block');
    expect(await bob.isVisible('#block-btn')).toBe(true);
    await bob.click('#block-btn');
    await expectEnds('block', [alice, 'declined'], [bob, 'declined']);
    expect(requestsOf.get(bob)).toContain('PUT /v1/call-policy');
    await alice.click('#call-btn');
    await alice.waitForSelector('#call-state[data-state="outgoing"]');
    await endReason(alice, 'unanswered');
    // Bob's page never rang: it still shows the declined call.
    expect(await bob.getAttribute('#call-state', 'data-state')).toBe('ended');
    expect(await bob.getAttribute('#end-reason', 'data-reason')).toBe('declined');
    await shot(bob, 'block-bob-never-rang');
    expect(errorsOf.get(bob)).toEqual([]);
  }, 90_000);

  it('do not disturb: the callee turns it on; a call rings out for the caller and never rings the callee; turned off, calls ring', async () => {
    const suffix = randomUUID().slice(0, 8);
    const bobId = `bob-${suffix}`;
    const [alice, bob] = await Promise.all([signedIn(shortRing.url, `alice-${suffix}`, 'Alice'), signedIn(shortRing.url, bobId, 'Bob')]);
    await bob.check('#dnd-toggle');
    await expect.poll(() => requestsOf.get(bob)!.filter((r) => r === 'PUT /v1/call-policy').length).toBe(1);
    await alice.fill('#callee', bobId);
    await alice.click('#call-btn');
    await alice.waitForSelector('#call-state[data-state="outgoing"]');
    await endReason(alice, 'unanswered');
    expect(await bob.getAttribute('#call-state', 'data-state')).toBe('idle');
    await shot(bob, 'dnd-bob-never-rang');
    await bob.uncheck('#dnd-toggle');
    await expect.poll(() => requestsOf.get(bob)!.filter((r) => r === 'PUT /v1/call-policy').length).toBe(2);
    // It rings (dial waits for bob's incoming call), and rings out on both sides: no race with the
    // ring window, as a click would be.
    await dial(alice, bob, bobId, 'dnd-off');
    await expectEnds('dnd-off', [alice, 'unanswered'], [bob, 'unanswered']);
    expect(errorsOf.get(bob)).toEqual([]);
  }, 90_000);

  it('cancel: the caller hangs up while it rings; the callee shows callerCancelled', async () => {
    const { alice, bob, bobId } = await users(server.url);
    await dial(alice, bob, bobId, 'cancel');
    await alice.click('#cancel-btn');
    await expectEnds('cancel', [alice, 'localHangup'], [bob, 'callerCancelled', 'Alice cancelled the call']);
    // Bob calls back from the missed call (the invitation's handle names alice).
    await bob.click('#callback-btn');
    await alice.waitForSelector('#call-state[data-state="incoming"]');
    await expect.poll(() => alice.textContent('#call-peer')).toContain('Bob');
    await shot(alice, 'cancel-alice-called-back');
    await alice.click('#decline-btn');
    await endReason(bob, 'declined');
  }, 90_000);

  it('ring-out: nobody answers within RING_TIMEOUT_MS; both sides show unanswered', async () => {
    const { alice, bob, bobId } = await users(shortRing.url);
    await dial(alice, bob, bobId, 'ringout');
    await expectEnds('ringout', [alice, 'unanswered', 'No answer'], [bob, 'unanswered', 'Missed call']);
  }, 90_000);

  it('reconnect during a call: the offer sent while the callee was offline is fetched by GET messages, and media connects', async () => {
    const { alice, bob, bobId } = await users(server.url);
    await dial(alice, bob, bobId, 'offline-offer');
    // Bob answers with his socket down: alice's offer and candidates go out while he cannot get them.
    await bob.evaluate(() => window.softphone.state.signaling.stop());
    await bob.waitForSelector('#conn-status[data-state="offline"]');
    await bob.click('#answer-btn');
    await bob.waitForSelector('#call-state[data-state="connecting"]');
    await expect
      .poll(() => bob.evaluate(async () => (await window.softphone.state.api.messagesAfter(window.softphone.state.call!.id, 0)).messages.length), {
        timeout: STEP_TIMEOUT_MS,
      })
      .toBeGreaterThan(0);
    expect(await bob.getAttribute('#call-state', 'data-state')).toBe('connecting');
    await shot(bob, 'offline-offer-bob-answered-offline');
    await bob.click('#reconnect-btn');
    await expect.poll(() => bob.textContent('#events')).toMatch(/in-call message\(s\) after seq 0/);
    await Promise.all([
      alice.waitForSelector('#call-state[data-state="connected"]', { timeout: 45_000 }),
      bob.waitForSelector('#call-state[data-state="connected"]', { timeout: 45_000 }),
    ]);
    // The selected pair shows up in the stats a moment after `connected`.
    await expect.poll(async () => (await peerStats(bob))?.localType, { timeout: 10_000 }).toBe('relay');
    expect(await peerStats(bob)).toMatchObject({ policy: 'relay', state: 'connected' });
    await shot(bob, 'offline-offer-bob-connected-after-reconnect');
    await bob.click('#hangup-btn');
    await endReason(bob, 'localHangup');
    await endReason(alice, 'remoteEnded');
  }, 120_000);

  it('reconnect by cursor: events sent while the socket was down are replayed, and the page resumes', async () => {
    const { alice, bob, bobId } = await users(server.url);
    // Bob's socket goes away; alice calls meanwhile; bob reconnects from his cursor and rings.
    await bob.evaluate(() => window.softphone.state.signaling.stop());
    await bob.waitForSelector('#conn-status[data-state="offline"]');
    await alice.fill('#callee', bobId);
    await alice.click('#call-btn');
    await alice.waitForSelector('#call-state[data-state="outgoing"]');
    expect(await bob.getAttribute('#call-state', 'data-state')).toBe('idle');
    await bob.click('#reconnect-btn');
    await bob.waitForSelector('#conn-status[data-state="online"]');
    await bob.waitForSelector('#call-state[data-state="incoming"]');
    await expect.poll(() => bob.textContent('#events')).toContain('resumed by cursor, 1 event(s) replayed');
    await shot(bob, 'reconnect-bob-resumed-ringing');
    await bob.click('#decline-btn');
    await endReason(alice, 'declined');
  }, 90_000);

  it('group call among three pages: ring two, receipts, join, decline, a late invite rings the decliner again, join, leave, end for all', async () => {
    const suffix = randomUUID().slice(0, 8);
    const [aliceId, bobId, carolId] = ['alice', 'bob', 'carol'].map((n) => `${n}-${suffix}`) as [string, string, string];
    const [alice, bob, carol] = await Promise.all([
      signedIn(server.url, aliceId, 'Alice'),
      signedIn(server.url, bobId, 'Bob'),
      signedIn(server.url, carolId, 'Carol'),
    ]);
    /** The page's participants list shows `userId` in `state`. */
    const member = (page: Page, userId: string, state: string) => page.waitForSelector(`#participants li[data-user-id="${userId}"][data-state="${state}"]`);
    const shots = async (label: string) => {
      for (const [name, page] of [['alice', alice], ['bob', bob], ['carol', carol]] as const) await shot(page, `group-${label}-${name}`);
    };

    // Alice picks bob and carol; both pages ring with the title and send their ringing receipts.
    await alice.fill('#group-users', `${bobId}, ${carolId}`);
    await alice.fill('#group-title', 'Standup');
    await alice.click('#group-call-btn');
    await alice.waitForSelector('#call-state[data-state="outgoing"]');
    for (const page of [bob, carol]) {
      await page.waitForSelector('#call-state[data-state="incoming"]');
      await expect.poll(() => page.textContent('#call-peer')).toContain('“Standup”, from Alice · group call');
      await member(page, aliceId, 'joined');
    }
    await member(alice, bobId, 'ringing');
    await member(alice, carolId, 'ringing');
    expect(await alice.textContent('#call-state')).toBe('Ringing…');
    expect(await alice.isVisible('#invite-form')).toBe(true);
    await shots('ringing');

    // Bob joins: the call is on for alice and bob, who see each other in it.
    await bob.click('#answer-btn');
    await Promise.all([alice, bob].map((page) => page.waitForSelector('#call-state[data-state="connected"]')));
    for (const page of [alice, bob]) await member(page, bobId, 'joined');
    expect(await bob.textContent('#hangup-btn')).toBe('Leave');
    expect(await alice.isVisible('#end-all-btn')).toBe(true);
    expect(await bob.isVisible('#end-all-btn')).toBe(false);

    // Carol declines: only she is out; the others see it.
    await carol.click('#decline-btn');
    await endReason(carol, 'declined');
    expect(await carol.textContent('#end-reason')).toContain('You declined');
    for (const page of [alice, bob]) await member(page, carolId, 'declined');
    await shots('declined');

    // Bob rings carol again; her page rings, she joins.
    await bob.fill('#invite-users', carolId);
    await bob.click('#invite-btn');
    await carol.waitForSelector('#call-state[data-state="incoming"]');
    for (const page of [alice, bob]) await member(page, carolId, 'ringing');
    await carol.click('#answer-btn');
    await carol.waitForSelector('#call-state[data-state="connected"]');
    for (const page of [alice, bob, carol]) for (const userId of [aliceId, bobId, carolId]) await member(page, userId, 'joined');
    await shots('three-in-call');

    // Live signals (docs/signaling.md "Live signals"): Carol mutes and raises her hand; the others' lists show it.
    await carol.click('#mute-btn');
    await carol.click('#hand-btn');
    for (const page of [alice, bob, carol]) await page.waitForSelector(`#participants li[data-user-id="${carolId}"][data-muted="true"][data-hand-raised="true"]`);
    expect(await carol.textContent('#mute-btn')).toBe('Unmute');
    await carol.click('#hand-btn');
    for (const page of [alice, bob]) await page.waitForSelector(`#participants li[data-user-id="${carolId}"][data-muted="true"][data-hand-raised="false"]`);
    await shots('signals');

    // Carol leaves: the call goes on for alice and bob.
    await carol.click('#hangup-btn');
    await endReason(carol, 'localHangup');
    expect(await carol.textContent('#end-reason')).toContain('You left the call');
    for (const page of [alice, bob]) await member(page, carolId, 'left');
    // Her live state is cleared with her leave.
    for (const page of [alice, bob]) expect(await page.getAttribute(`#participants li[data-user-id="${carolId}"]`, 'data-muted')).toBe('false');
    for (const page of [alice, bob]) expect(await page.getAttribute('#call-state', 'data-state')).toBe('connected');
    // This server has no SFU: the pages in the call say there is no media (media-session 503 sfu_unavailable), and show no tiles.
    for (const page of [alice, bob]) {
      await expect.poll(() => page.textContent('#group-media-note')).toMatch(/^No media: .*signaling goes on/);
      expect(await page.isVisible('#tiles')).toBe(false);
    }

    // Alice ends it for everyone.
    await alice.click('#end-all-btn');
    await expectEnds('group-end-for-all', [alice, 'localHangup', 'You ended the call for everyone'], [bob, 'remoteEnded', 'The call ended']);
    for (const page of [alice, bob]) for (const userId of [aliceId, bobId, carolId]) await member(page, userId, 'left');
    // Answer, end, invite and the receipts went over the socket as command frames (media-session is HTTP only).
    const commandRequests = [alice, bob, carol].flatMap((p) => requestsOf.get(p)!.filter((r) => /^POST \/v1\/calls\/[^/]+\/(?!media-session$)/.test(r)));
    expect(commandRequests).toEqual([]);
    for (const page of [alice, bob, carol]) expect(errorsOf.get(page)).toEqual([]);
  }, 120_000);
});
