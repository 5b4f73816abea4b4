import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { buildSync } from 'esbuild';

/**
 * The server (src/main.ts of the checkout at `root`) compiled into one ES module with its
 * dependencies left as imports, at `<root>/.test-build/server/main.mjs` (ignored by git): what the
 * test suite and the bench start, instead of compiling the TypeScript file by file through tsx at
 * every process start, which cost about a second of CPU each (docs/development.md "Faster loops").
 * It is the same code `npm run dev` runs. It lives inside the checkout so that its imports resolve
 * from that checkout's node_modules/ and its walk up to lua/ and demo/ (src/util/packageDir.ts)
 * finds them. Returns its path.
 */
export function buildServerBundle(root: string): string {
  const outfile = serverBundlePath(root);
  const { outputFiles } = buildSync({
    entryPoints: [join(root, 'src', 'main.ts')],
    bundle: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outfile,
    write: false,
    logLevel: 'warning',
  });
  // Written beside and renamed over: the bench smoke test builds it again while other test files
  // start servers from it, and a server must never load a half-written file.
  const temp = `${outfile}.${process.pid}.tmp`;
  mkdirSync(dirname(outfile), { recursive: true });
  writeFileSync(temp, outputFiles[0]!.contents);
  renameSync(temp, outfile);
  return outfile;
}

export function serverBundlePath(root: string): string {
  return join(root, '.test-build', 'server', 'main.mjs');
}
