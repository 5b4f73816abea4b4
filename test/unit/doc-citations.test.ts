import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * Code comments cite documents that are in the repository (README.md, docs/), by a section that
 * exists: no comment in src/, lua/, test/ (nor packages/client/src, bench/, scripts/) cites the
 * outside product spec or design notes, names a .md file the repo lacks, or quotes a section
 * heading the cited document does not have.
 */

const root = fileURLToPath(new URL('../../', import.meta.url));
const SCANNED = ['src', 'lua', 'test', 'packages/client/src', 'bench', 'scripts'];

function files(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (name === 'node_modules' || name === 'dist' || name === 'results') continue;
    if (statSync(path).isDirectory()) out.push(...files(path));
    else if (/\.(ts|lua)$/.test(name)) out.push(path);
  }
  return out;
}

/** The comments of a TypeScript or Lua source, each flattened to one line (no `*`, `//`, `--` prefixes). */
export function comments(source: string, lua: boolean): string[] {
  const pattern = lua ? /--\[\[[\s\S]*?\]\]|--[^\n]*/g : /\/\*[\s\S]*?\*\/|(?<![:'"`\w])\/\/[^\n]*/g;
  return [...source.matchAll(pattern)].map((m) =>
    m[0]
      .replace(/^--\[\[|\]\]$|^\/\*+|\*\/$/g, '')
      .split('\n')
      .map((l) => l.replace(/^\s*(\*|\/\/|--)?\s?/, '').trim())
      .join(' ')
      .trim(),
  );
}

const headingsCache = new Map<string, Set<string>>();
function headings(doc: string): Set<string> {
  let set = headingsCache.get(doc);
  if (!set) {
    const text = readFileSync(join(root, doc), 'utf8');
    set = new Set([...text.matchAll(/^#{1,6}\s+(.+?)\s*$/gm)].map((m) => m[1]!.replace(/`/g, '')));
    headingsCache.set(doc, set);
  }
  return set;
}

/** What is wrong with the citations in one comment of `file` (repository-relative path). */
export function problems(comment: string, file: string): string[] {
  const out: string[] = [];
  const outside = [
    /\bspec(ification)?\s*(§|section\b|\d)/i,
    /§\s*\d/,
    /\bspec's\b/i,
    /\b(the|our|product) spec\b/i,
    /\bDESIGN(\.md)?\b/,
    /calling-backend-reference/,
  ];
  for (const re of outside) if (re.test(comment)) out.push(`cites a document outside the repo (${re}): ${comment.slice(0, 160)}`);
  for (const m of comment.matchAll(/(?<![\w/.-])((?:\.\.?\/)*[\w-][\w./-]*\.md)\b/g)) {
    const name = m[1]!;
    const candidates = [join(root, name), join(root, 'docs', name), join(root, dirname(file), name)];
    if (!candidates.some((c) => existsSync(c))) out.push(`names ${name}, which is not in the repo`);
  }
  // A README anywhere (README, bench/README.md, packages/client/README.md) or a page of docs/.
  for (const m of comment.matchAll(/(?<![\w/.-])((?:[\w-]+\/)*README(?:\.md)?|docs\/[\w-]+\.md)\s+((?:"[^"]+"(?:\s*,\s*|\s+and\s+)?)+)/g)) {
    const doc = m[1]!.replace(/README$/, 'README.md');
    if (!existsSync(join(root, doc))) continue; // reported above
    for (const q of m[2]!.matchAll(/"([^"]+)"/g)) {
      const section = q[1]!.replace(/`/g, '');
      if (!headings(doc).has(section)) out.push(`cites ${doc} "${section}", which has no such section`);
    }
  }
  return out;
}

describe('citations in code comments', () => {
  it('the checker catches what it must', () => {
    expect(problems('Push retries (spec 4.2 rule 4): a transient refusal is retried', 'src/x.ts')).toHaveLength(1);
    expect(problems('as DESIGN.md fixes them', 'src/x.ts').length).toBeGreaterThan(0);
    expect(problems('see docs/nowhere.md', 'src/x.ts')).toEqual(['names docs/nowhere.md, which is not in the repo']);
    expect(problems('README "No such heading"', 'src/x.ts')).toEqual(['cites README.md "No such heading", which has no such section']);
    expect(problems('docs/protocol.md "Events", "Limits" and README "Quick start"', 'src/x.ts')).toEqual([]);
    expect(problems('bench/README.md "Comparing two builds"', 'bench/x.ts')).toEqual([]);
    expect(problems('bench/README.md "Quick start"', 'bench/x.ts')).toEqual(['cites bench/README.md "Quick start", which has no such section']);
    expect(comments('const u = "http://x"; // spec 4.1\n/**\n * docs/protocol.md "States and\n * transitions"\n */', false)).toEqual([
      'spec 4.1',
      'docs/protocol.md "States and transitions"',
    ]);
  });

  it('no comment in src/, lua/, test/ cites a document absent from the repo, or a section absent from its document', () => {
    const found: string[] = [];
    let scanned = 0;
    for (const dir of SCANNED) {
      for (const path of files(join(root, dir))) {
        const file = relative(root, path);
        scanned++;
        if (file === 'test/unit/doc-citations.test.ts') continue; // its fixtures are bad citations on purpose
        for (const c of comments(readFileSync(path, 'utf8'), path.endsWith('.lua'))) for (const p of problems(c, file)) found.push(`${file}: ${p}`);
      }
    }
    expect(scanned).toBeGreaterThan(100);
    expect(found).toEqual([]);
  });
});
