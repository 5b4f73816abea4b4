import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * Every relative link in README.md, CONTRIBUTING.md and docs/*.md resolves: the file (or folder)
 * exists, and a `#anchor` names a heading of the linked Markdown page (GitHub's slugs).
 */

const root = fileURLToPath(new URL('../../', import.meta.url));
const pages = ['README.md', 'CONTRIBUTING.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
export function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

function anchors(page: string): Set<string> {
  const text = readFileSync(join(root, page), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of text.matchAll(/^#{1,6}\s+(.+?)\s*$/gm)) {
    const base = slug(m[1]!.replace(/`/g, ''));
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** The broken relative links of one page. */
export function brokenLinks(page: string): string[] {
  const text = readFileSync(join(root, page), 'utf8').replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
  const out: string[] = [];
  for (const m of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    const target = m[1]!;
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
    const [path, anchor] = target.split('#') as [string, string | undefined];
    const file = path === '' ? page : relative(root, join(root, dirname(page), decodeURIComponent(path)));
    if (!existsSync(join(root, file))) {
      out.push(`${page}: ${target} (no ${file})`);
      continue;
    }
    if (anchor !== undefined && file.endsWith('.md') && statSync(join(root, file)).isFile() && !anchors(file).has(anchor)) {
      out.push(`${page}: ${target} (no heading #${anchor} in ${file})`);
    }
  }
  return out;
}

describe('links in the documentation', () => {
  it('the checker catches a missing file and a missing anchor', () => {
    expect(slug('What the commands need')).toBe('what-the-commands-need');
    expect(slug('`call.accepted` (answered)')).toBe('callaccepted-answered');
    expect(anchors('README.md').has('quick-start')).toBe(true);
    expect(anchors('README.md').has('no-such-heading')).toBe(false);
  });

  it('every relative link in README.md, CONTRIBUTING.md and docs/ resolves', () => {
    expect(pages.length).toBeGreaterThan(6);
    expect(pages.flatMap(brokenLinks)).toEqual([]);
  });
});
