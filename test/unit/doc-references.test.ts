import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * A section named in prose, `README "Quick start"`, `docs/api.md "Errors", "Abuse limits"` or
 * `[api.md](api.md#errors) "Errors"`, is a heading of that document as it is now. Links and their
 * anchors are checked by remark (doc-links.test.ts); this checks the quoted names, which no link
 * checker reads. Code comments are checked the same way by doc-citations.test.ts.
 */

const root = fileURLToPath(new URL('../../', import.meta.url));

const pages = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.md'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((f) => f !== '' && !f.includes('node_modules/') && !f.startsWith('bench/results/'));

/** A Markdown text without its fenced code blocks (samples may quote anything). */
const prose = (text: string) => text.replace(/^(```|~~~)[\s\S]*?^\1/gm, '');

/** The headings of a Markdown document, as written (backticks dropped). */
export function headings(text: string): Set<string> {
  return new Set([...prose(text).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)].map((m) => m[1]!.replace(/`/g, '')));
}

/** The document a reference names, repository-relative, or undefined when there is none. */
function resolve(name: string, page: string): string | undefined {
  if (/^README$/.test(name)) return 'README.md';
  for (const candidate of [join(dirname(page), name), name, join('docs', name)]) {
    const path = normalize(candidate);
    if (existsSync(join(root, path)) && statSync(join(root, path)).isFile()) return path;
  }
  return undefined;
}

/**
 * The section references in one page's text that name no heading of their document: `DOC "A"`,
 * `DOC "A", "B" and "C"`, `[text](DOC#anchor) "A"`, with DOC a README or a .md path.
 */
export function badReferences(text: string, page: string, read: (doc: string) => string): string[] {
  const out: string[] = [];
  const doc = String.raw`(README(?:\.md)?|(?:\.\.?/)*[\w./-]*[\w-]\.md)`;
  const quoted = String.raw`((?:"[^"\n]+"(?:\s*,\s*|\s+and\s+|\s+or\s+)?)+)`;
  const patterns = [new RegExp(String.raw`(?<![\w/#.-]|\]\()${doc}\s+${quoted}`, 'g'), new RegExp(String.raw`\]\(${doc}(?:#[\w-]*)?\)\s+${quoted}`, 'g')];
  const body = prose(text).replace(/`[^`\n]*`/g, (m) => (m.includes('"') ? '' : m));
  for (const re of patterns) {
    for (const m of body.matchAll(re)) {
      const target = resolve(m[1]!.replace(/^README$/, 'README'), page);
      if (!target) {
        out.push(`${page}: names ${m[1]}, which is not in the repository`);
        continue;
      }
      const have = headings(read(target));
      for (const q of m[2]!.matchAll(/"([^"]+)"/g)) {
        const section = q[1]!.replace(/`/g, '');
        if (!have.has(section)) out.push(`${page}: ${m[1]} "${section}": ${target} has no such heading`);
      }
    }
  }
  return out;
}

const read = (doc: string) => readFileSync(join(root, doc), 'utf8');

describe('section names in the documentation', () => {
  it('the checker catches a renamed heading and a missing document, and passes a good reference', () => {
    const docs: Record<string, string> = { 'README.md': '# x\n\n## Quick start\n', 'docs/api.md': '# API\n\n### Errors\n\n### `Abuse` limits\n' };
    const readFake = (d: string) => docs[d] ?? read(d);
    expect(badReferences('See README "Quick start" and docs/api.md "Errors", "Abuse limits".', 'docs/x.md', readFake)).toEqual([]);
    expect(badReferences('See [api.md](api.md#errors) "Errors".', 'docs/signaling.md', readFake)).toEqual([]);
    expect(badReferences('(README "Quick begin")', 'docs/x.md', readFake)).toHaveLength(1);
    expect(badReferences('See README "Quick begin".', 'docs/x.md', readFake)).toEqual(['docs/x.md: README "Quick begin": README.md has no such heading']);
    expect(badReferences('([api.md](api.md#errors) "Mistakes")', 'docs/signaling.md', readFake)).toEqual(['docs/signaling.md: api.md "Mistakes": docs/api.md has no such heading']);
    expect(badReferences('docs/nowhere.md "Intro"', 'README.md', readFake)).toEqual(['README.md: names docs/nowhere.md, which is not in the repository']);
    expect(badReferences('```\nREADME "Not checked in a sample"\n```\n', 'docs/x.md', readFake)).toEqual([]);
  });

  it('every "Section" a page names is a heading of the document it names', () => {
    expect(pages.length).toBeGreaterThan(10);
    expect(pages.flatMap((page) => badReferences(read(page), page, read))).toEqual([]);
  });
});
