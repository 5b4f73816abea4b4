import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * The server the tests start (test/support/server.ts): src/main.ts compiled into one ES module
 * with the dependencies left as imports, built once per test run by vitest's global setup
 * (test/support/globalSetup.ts). It is the same code `npm run dev` runs through tsx: only the
 * TypeScript is compiled ahead, and at once, rather than file by file at each start, which took
 * about 1 s of CPU per server process (docs/development.md "Faster loops"). It lives in the
 * repository (.test-build/, ignored by git) so that its imports resolve from node_modules/ and
 * its walk up to lua/ and demo/ (src/util/packageInfo.ts) finds them.
 */
export const SERVER_BUNDLE = join(REPO_ROOT, '.test-build', 'server', 'main.mjs');

export function buildServer(): void {
  buildSync({
    entryPoints: [join(REPO_ROOT, 'src', 'main.ts')],
    bundle: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outfile: SERVER_BUNDLE,
    logLevel: 'warning',
  });
}

/** The bundle's path, after checking the global setup made it. */
export function serverBundle(): string {
  if (!existsSync(SERVER_BUNDLE)) throw new Error(`${SERVER_BUNDLE} is missing: tests start the server built by vitest's global setup (test/support/globalSetup.ts)`);
  return SERVER_BUNDLE;
}
