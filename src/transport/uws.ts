import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type uWSModule from 'uWebSockets.js';

/**
 * Which uWebSockets.js binary runs this process (docs/operations.md "Supported Node versions"). Two builds
 * are installed, and the first that loads a native binary for this Node.js wins:
 *  1. `@btc-vision/uwebsockets.js` (20.57.0): Node 20, 22, 24 and 25 (ABIs 115/127/137/141), on
 *     glibc ≥ 2.38 (Debian trixie, Ubuntu 24.04, their Node images);
 *  2. `uWebSockets.js` (`@trufflesuite/uws-js-unofficial` 20.30.0): Node ≤ 20 (ABI ≤ 115), on older
 *     glibc such as Debian bookworm's 2.36.
 * The second silently falls back to a slow `ws`-based shim when its binary does not load. The shim
 * lacks the native-only exports checked here; it is refused unless explicitly allowed
 * (ALLOW_UWS_FALLBACK=true).
 */
export type Uws = typeof uWSModule;

const CANDIDATES = ['@btc-vision/uwebsockets.js', 'uWebSockets.js'] as const;
const require = createRequire(import.meta.url);

export function isNativeUws(mod: object): boolean {
  const m = mod as Record<string, unknown>;
  return typeof m.getParts === 'function' && typeof m.SSLApp === 'function';
}

export interface LoadedUws {
  uWS: Uws;
  /** `name@version` of the package whose binary loaded. */
  build: string;
}

export function loadUws(allowFallback: boolean): LoadedUws {
  const failures: string[] = [];
  let fallback: LoadedUws | undefined;
  for (const name of CANDIDATES) {
    let mod: Uws;
    try {
      mod = require(name) as Uws;
    } catch (err) {
      failures.push(`${name}: ${lastLine(err)}`);
      continue;
    }
    const build = packageOf(require.resolve(name));
    if (isNativeUws(mod)) return { uWS: mod, build };
    failures.push(`${name}: no native binary for this Node.js (fell back to its ws shim)`);
    fallback ??= { uWS: mod, build: `${build} (ws fallback)` };
  }
  if (fallback && allowFallback) return fallback;
  throw new Error(
    `no uWebSockets.js native binary loads on Node.js ${process.version} (ABI ${process.versions.modules}, ${process.platform}/${process.arch}):\n  ` +
      failures.join('\n  ') +
      '\nRun on a supported Node.js and glibc (docs/operations.md "Supported Node versions"), or set ALLOW_UWS_FALLBACK=true to run slowly anyway',
  );
}

/** `name@version` of the package a resolved file belongs to (its exports hide package.json). */
function packageOf(file: string): string {
  for (let dir = dirname(file); dir !== dirname(dir); dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      const pkg = JSON.parse(readFileSync(manifest, 'utf8')) as { name: string; version: string };
      return `${pkg.name}@${pkg.version}`;
    }
  }
  return 'unknown';
}

/** The loader's own reason (e.g. "version `GLIBC_2.38' not found"): the last line of its message. */
function lastLine(err: unknown): string {
  const lines = String((err as Error).message ?? err).split('\n').filter((l) => l.trim() !== '');
  return (lines.at(-1) ?? '').slice(0, 300);
}
