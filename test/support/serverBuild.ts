import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildServerBundle, serverBundlePath } from '../../scripts/serverBundle.js';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * The server the tests start (test/support/server.ts), built once per test run by vitest's global
 * setup (test/support/globalSetup.ts): scripts/serverBundle.ts.
 */
const SERVER_BUNDLE = serverBundlePath(REPO_ROOT);

export function buildServer(): void {
  buildServerBundle(REPO_ROOT);
}

/** The bundle's path, after checking the global setup made it. */
export function serverBundle(): string {
  if (!existsSync(SERVER_BUNDLE)) throw new Error(`${SERVER_BUNDLE} is missing: tests start the server built by vitest's global setup (test/support/globalSetup.ts)`);
  return SERVER_BUNDLE;
}
