import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

/**
 * Every relative link and `#anchor` in the repository's Markdown resolves: the file (or folder)
 * exists, and an anchor names a heading of the linked page (GitHub's slugs). The checker is
 * remark-validate-links run by remark-cli with .remarkrc.json (`repository: false`: it reads only
 * the files here and fetches nothing; links with a scheme, `https:` and the like, are not checked).
 * By hand: `npx remark --quiet --frail .`
 */

const root = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);

/** Every Markdown file of the repository, tracked or new (not ignored). */
const pages = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.md'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((f) => f !== '' && !f.includes('node_modules/'));

/** remark's findings (one line each: file, place, message), empty when every link resolves. */
async function findings(files: string[]): Promise<string[]> {
  const out = await run(join(root, 'node_modules/.bin/remark'), ['--quiet', '--frail', '--no-color', '--no-stdout', '--rc-path', join(root, '.remarkrc.json'), ...files], {
    cwd: root,
    env: { ...process.env, NO_COLOR: '1' },
    maxBuffer: 32 << 20,
  }).catch((e: { stdout: string; stderr: string; code: number }) => e);
  const lines: string[] = [];
  let file = '';
  for (const line of out.stderr.split('\n')) {
    if (/^\S.*\.md$/.test(line)) file = line;
    else if (/\b(warning|error)\b/.test(line) && !/^[⚠✖]/.test(line.trim())) lines.push(`${file}: ${line.trim().replace(/\s+/g, ' ')}`);
  }
  return lines;
}

describe('links in the documentation', () => {
  it('the checker reports a renamed heading, a missing file and a missing anchor on the same page', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'links-'));
    try {
      writeFileSync(join(dir, 'a.md'), '# A\n\n## Here\n\n[ok](b.md#b-page) [renamed](b.md#old-name) [gone](c.md) [self](#nowhere) [ok](#here) [web](https://example.invalid/x)\n');
      writeFileSync(join(dir, 'b.md'), '# B page\n');
      const found = await findings([dir]);
      expect(found).toHaveLength(3);
      expect(found.join('\n')).toMatch(/#old-name/);
      expect(found.join('\n')).toMatch(/c\.md/);
      expect(found.join('\n')).toMatch(/#nowhere/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('every relative link and anchor in the repository’s Markdown resolves', async () => {
    expect(pages).toEqual(expect.arrayContaining(['README.md', 'CONTRIBUTING.md', 'docs/api.md', 'bench/README.md']));
    expect(await findings(pages)).toEqual([]);
  }, 60_000);
});
