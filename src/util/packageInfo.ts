import { readFileSync } from 'node:fs';

/**
 * The server package's version, read from its package.json: the interface documents carry it as
 * `info.version` (docs/protocol.md "Versioning"). Found by walking up from this module, so it works from
 * src/ (tsx) and from dist/src/ (the build).
 */
export function packageVersion(): string {
  let dir = new URL('.', import.meta.url);
  for (let i = 0; i < 6; i++) {
    try {
      const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'calling-backend' && pkg.version) return pkg.version;
    } catch {
      // no package.json here: keep walking up
    }
    dir = new URL('..', dir);
  }
  throw new Error('package.json of calling-backend not found above src/util');
}
