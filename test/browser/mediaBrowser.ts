import { chromium, type Browser } from 'playwright-core';

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
      '--use-fake-device-for-media-stream',
      '--use-fake-ui-for-media-stream',
    ],
  });
}
