import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../support/server.js';

/**
 * Dependencies point down: the domain (calls, events, push, timers, limits) and the Redis layer
 * never import the edges that serve them (http, gateway, server wiring), so each can be read,
 * tested and changed without those.
 */

const SRC = join(REPO_ROOT, 'src');
const LOWER = ['calls', 'events', 'history', 'push', 'redis', 'timers', 'limits', 'observability', 'users', 'util', 'webhooks'];
const EDGES = ['http', 'gateway', 'server.ts', 'main.ts'];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

describe('dependency direction', () => {
  it('no module of the domain or the Redis layer imports http/, gateway/ or the server wiring', () => {
    const violations: string[] = [];
    for (const layer of LOWER) {
      for (const file of sourceFiles(join(SRC, layer))) {
        for (const m of readFileSync(file, 'utf8').matchAll(/^\s*(?:import|export)[^'"]*from\s+['"](\.[^'"]+)['"]/gm)) {
          const target = relative(SRC, join(file, '..', m[1]!));
          if (EDGES.some((edge) => target === edge.replace(/\.ts$/, '.js') || target.startsWith(`${edge}/`))) {
            violations.push(`${relative(SRC, file)} imports ${m[1]}`);
          }
        }
      }
    }
    expect(violations).toEqual([]);
  });
});
