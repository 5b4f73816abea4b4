import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../support/server.js';

/**
 * The layers of src/, bottom first (docs/architecture.md "Layers"). A module imports only from its
 * own folder and from folders in lower layers: never up, and never sideways into a peer of its own
 * layer (the two transports, http and gateway, know nothing of each other). And no file of the
 * repository takes part in an import circle.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['util', 'observability', 'auth'],
  ['config'],
  ['redis'],
  ['limits', 'calls'],
  ['history'],
  ['events'],
  ['push', 'timers', 'media'],
  ['webhooks'],
  ['users'],
  ['commands'],
  ['contracts'],
  ['transport'],
  ['http', 'gateway'],
  ['demo'],
  ['roles'],
  ['server.ts'],
  ['main.ts'],
];

const SRC = join(REPO_ROOT, 'src');
const IMPORT = /^\s*(?:import|export)[^'"]*?from\s+['"](\.[^'"]+)['"]|\bimport\(\s*['"](\.[^'"]+)['"]\s*\)/gm;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.name === 'node_modules' ? [] : e.isDirectory() ? sourceFiles(join(dir, e.name)) : /\.(ts|mts|mjs)$/.test(e.name) ? [join(dir, e.name)] : [],
  );
}

/** The files `file` imports (relative imports only), as paths of files that exist. */
function importsOf(file: string): string[] {
  const out: string[] = [];
  for (const m of readFileSync(file, 'utf8').matchAll(IMPORT)) {
    const target = join(dirname(file), (m[1] ?? m[2])!);
    const candidates = [target, target.replace(/\.js$/, '.ts'), target.replace(/\.mjs$/, '.mts'), `${target}.ts`];
    const found = candidates.find((c) => existsSync(c) && c !== dirname(c));
    if (found) out.push(found);
  }
  return out;
}

/** The top-level entry of src/ a path belongs to (a folder, or a file such as server.ts). */
const topOf = (path: string) => relative(SRC, path).split('/')[0]!;
const rank = new Map(LAYERS.flatMap((names, i) => names.map((n) => [n, i] as const)));

describe('dependency direction', () => {
  it('every entry of src/ has a layer', () => {
    const entries = readdirSync(SRC);
    expect(entries.filter((e) => !rank.has(e))).toEqual([]);
  });

  it('no module of src/ imports up or sideways', () => {
    const violations: string[] = [];
    for (const file of sourceFiles(SRC)) {
      const from = topOf(file);
      for (const target of importsOf(file)) {
        const to = topOf(target);
        if (to === from) continue;
        if (!(rank.get(to)! < rank.get(from)!)) violations.push(`${relative(SRC, file)} imports ${relative(SRC, target)}`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('no module of src/ is over 400 lines (one that grows past it does several jobs: split it)', () => {
    const long = sourceFiles(SRC)
      .map((f) => [relative(SRC, f), readFileSync(f, 'utf8').split('\n').length - 1] as const)
      .filter(([, lines]) => lines > 400);
    expect(long).toEqual([]);
  });

  it('no import circle anywhere in the repository (src, bench, test, scripts, the client package)', () => {
    const roots = ['src', 'bench', 'test', 'scripts', 'packages/client/src'].map((r) => join(REPO_ROOT, r));
    const graph = new Map<string, string[]>();
    for (const file of roots.flatMap((r) => (existsSync(r) ? sourceFiles(r) : []))) graph.set(file, importsOf(file));
    // Tarjan's strongly connected components: any component of more than one file is a circle.
    let next = 0;
    const index = new Map<string, number>();
    const low = new Map<string, number>();
    const stack: string[] = [];
    const onStack = new Set<string>();
    const circles: string[][] = [];
    const visit = (v: string): void => {
      index.set(v, next);
      low.set(v, next++);
      stack.push(v);
      onStack.add(v);
      for (const w of graph.get(v) ?? []) {
        if (!graph.has(w)) continue;
        if (!index.has(w)) {
          visit(w);
          low.set(v, Math.min(low.get(v)!, low.get(w)!));
        } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
      if (low.get(v) !== index.get(v)) return;
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(relative(REPO_ROOT, w));
      } while (w !== v);
      if (component.length > 1) circles.push(component.sort());
    };
    for (const v of graph.keys()) if (!index.has(v)) visit(v);
    expect(graph.size).toBeGreaterThan(250);
    expect(circles).toEqual([]);
  });

  it('docs/architecture.md draws the same layers', () => {
    const page = readFileSync(join(REPO_ROOT, 'docs/architecture.md'), 'utf8');
    const section = page.slice(page.indexOf('## Layers'));
    const drawn = [...section.slice(0, section.indexOf('```', section.indexOf('```') + 3)).matchAll(/^\s*\d+\s+(.+)$/gm)].map((m) =>
      m[1]!.split(/[,\s]+/).filter(Boolean),
    );
    expect(drawn).toEqual([...LAYERS].reverse().map((l) => [...l]));
  });
});
