import { afterAll, beforeAll } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { startStack, type Stack } from '../support/stack.js';
import { janusEnv, startJanus, type Janus } from '../support/janus.js';
import { startCoturn, type Coturn } from '../support/coturn.js';

/**
 * Debian's Chromium (or CHROMIUM_PATH) for the media suites: headless, with fake camera and
 * microphone devices granted without a prompt, and nothing that would reach the network.
 */
export function launchMediaBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      // Containers often have a small /dev/shm; Chromium then writes shared memory to /tmp instead.
      '--disable-dev-shm-usage',
      // 10 frames a second instead of 20: half the video encoding and decoding, the browser suites'
      // largest CPU cost; every check here is of bytes and frames arriving, not of a frame rate.
      '--use-fake-device-for-media-stream=fps=10',
      '--use-fake-ui-for-media-stream',
    ],
  });
}

/** What a Janus media suite runs on: Janus, coturn, a stack configured for both, and Chromium. */
export interface JanusRig {
  janus: Janus;
  coturn: Coturn;
  stack: Stack;
  browser: Browser;
}

/**
 * Starts the file's Janus rig before its tests (coturn relaying on `relayIp` when given; the
 * stack with `env` besides the Janus and TURN settings) and stops it after them.
 */
export function janusRigForFile(turnSecret: string, opts: { env?: Record<string, string>; relayIp?: string }, started: (rig: JanusRig) => void): void {
  let rig: Partial<JanusRig> = {};
  beforeAll(async () => {
    const [janus, coturn] = await Promise.all([startJanus(), startCoturn(turnSecret, opts.relayIp ? { relayIp: opts.relayIp } : {})]);
    rig = { janus, coturn };
    rig.stack = await startStack({ ...opts.env, ...janusEnv(janus), TURN_URLS: coturn.url, TURN_SECRET: turnSecret });
    rig.browser = await launchMediaBrowser();
    started(rig as JanusRig);
  }, 90_000);
  afterAll(async () => {
    await rig.browser?.close();
    await rig.stack?.stop();
    await Promise.all([rig.janus?.stop(), rig.coturn?.stop()]);
  });
}
