#!/usr/bin/env node
/**
 * Trims the production node_modules the Docker image ships (Dockerfile, build stage, after
 * `npm run build` and `npm prune --omit=dev`; docs/operations.md "The image"):
 *  - of the two uWebSockets.js packages, which carry native binaries for every platform and
 *    Node.js ABI (about 230 MB), keeps the one binary that loads here: the server's own loader
 *    (src/transport/uws.ts, compiled) picks it, exactly as it will at start on this Node.js;
 *  - drops what no running server reads: source maps, TypeScript sources and declarations,
 *    Markdown, and packages' test, docs and example folders (licence files stay);
 *  - drops the workspace link to packages/client, which the image does not hold.
 * Then it imports the compiled server, so a file the server needs cannot go missing unnoticed.
 * Run from the application folder; it prints what it kept and how much it removed.
 */
import { existsSync, lstatSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';

const app = process.cwd();
const modules = join(app, 'node_modules');
const UWS_PACKAGES = ['uWebSockets.js', '@btc-vision/uwebsockets.js'].map((p) => join(modules, p));
const DROPPED_FILES = /\.(map|ts|mts|cts|md|markdown)$/i;
const KEPT_FILES = /^(licen[cs]e|copying|notice)/i;
const DROPPED_DIRS = new Set(['test', 'tests', '__tests__', 'docs', 'example', 'examples']);

const { loadUws } = await import(pathToFileURL(join(app, 'dist/src/transport/uws.js')).href);
const { build } = loadUws(false);
// Native addons are cached by file name: the one the loader just opened.
const require = createRequire(import.meta.url);
const loaded = Object.keys(require.cache).filter((f) => f.endsWith('.node'));
if (loaded.length !== 1) throw new Error(`prune-image: expected one uWebSockets.js binary loaded, found ${loaded.length}`);

let removed = 0;
function remove(path) {
  if (!existsSync(path)) return;
  removed += size(path);
  rmSync(path, { recursive: true, force: true });
}
function size(path) {
  const st = lstatSync(path);
  if (!st.isDirectory()) return st.size;
  return readdirSync(path).reduce((sum, name) => sum + size(join(path, name)), 0);
}
function walk(dir, visit) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (visit(path, entry) !== false && entry.isDirectory() && !entry.isSymbolicLink()) walk(path, visit);
  }
}

for (const pkg of UWS_PACKAGES) {
  walk(pkg, (path, entry) => {
    if (entry.isFile() && entry.name.endsWith('.node') && path !== loaded[0]) remove(path);
  });
}
walk(modules, (path, entry) => {
  if (entry.isDirectory() && DROPPED_DIRS.has(entry.name)) {
    remove(path);
    return false;
  }
  if (entry.isFile() && DROPPED_FILES.test(entry.name) && !KEPT_FILES.test(entry.name)) remove(path);
  return true;
});
remove(join(modules, '@calling-backend'));

await import(pathToFileURL(join(app, 'dist/src/server.js')).href);
console.log(`prune-image: kept ${build} (${relative(app, loaded[0])}); removed ${(removed / 1e6).toFixed(1)} MB`);
