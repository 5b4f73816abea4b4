import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { devBanner } from '../../src/demo/devBanner.js';

/**
 * The developer's first commands (README "Quick start"): `npm run token -- --help` prints its
 * usage, an unknown option prints it too (no stack trace), `npm run dev` says where the softphone
 * is, and the softphone's form patterns compile as Chromium compiles them.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function token(...args: string[]) {
  return spawnSync('npm', ['run', '-s', 'token', '--', ...args], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, AUTH_JWT_SECRET: 'dev-tools-test-secret' } });
}

describe('npm run token', () => {
  it('--help prints the usage and exits 0', () => {
    const r = token('--help');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^usage: npm run token -- --sub <userId> --iid <installationId>/);
    for (const option of ['--sub', '--iid', '--name', '--ttl', '--help']) expect(r.stdout).toContain(option);
  });

  it('an unknown option or a missing one prints what is wrong and the usage, exit 2, no stack trace', () => {
    for (const [args, problem] of [
      [['--bogus'], /Unknown option '--bogus'/],
      [['--sub', 'alice'], /--sub and --iid are required/],
      [['--sub', 'alice', '--iid', 'alice-phone', '--ttl', 'soon'], /--ttl must be a whole number/],
    ] as const) {
      const r = token(...args);
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(problem);
      expect(r.stderr).toContain('usage: npm run token');
      expect(r.stderr).not.toMatch(/^\s+at /m);
    }
  });

  it('mints a token with --sub and --iid', () => {
    const r = token('--sub', 'carol', '--iid', 'carol-phone', '--name', 'Carol');
    expect(r.status, r.stderr).toBe(0);
    const [, payload] = r.stdout.trim().split('.');
    expect(JSON.parse(Buffer.from(payload!, 'base64url').toString())).toMatchObject({ sub: 'carol', iid: 'carol-phone', name: 'Carol' });
  });
});

describe('npm run dev', () => {
  it('says where the softphone is, with and without DEMO', () => {
    const base = { baseUrl: 'http://localhost:8080', alice: 'a', bob: 'b', curl: true };
    expect(devBanner({ ...base, demo: true })).toContain('Softphone: http://localhost:8080/demo/');
    const banner = devBanner({ ...base, demo: false });
    expect(banner).toMatch(/^Softphone: .*npm run demo serves it at http:\/\/localhost:8080\/demo\/$/m);
    // Never among the lines one pastes into a shell: those follow "Try:", up to a blank line.
    expect(/\nTry:[^\n]*\n(?:.+\n)+/.exec(banner)![0]).not.toContain('Softphone');
  });
});

describe('the softphone (demo/)', () => {
  /** Every `pattern` attribute of the demo's pages. */
  const patterns = readdirSync(new URL('../../demo', import.meta.url))
    .filter((f) => f.endsWith('.html'))
    .flatMap((f) => [...readFileSync(new URL(`../../demo/${f}`, import.meta.url), 'utf8').matchAll(/\spattern="([^"]*)"/g)].map((m) => ({ file: f, pattern: m[1]! })));

  it('has form patterns', () => {
    expect(patterns.length).toBeGreaterThan(0);
  });

  it('each pattern compiles with the `v` flag, as Chromium compiles a pattern attribute (HTML "the pattern attribute")', () => {
    for (const { file, pattern } of patterns) {
      expect(() => new RegExp(`^(?:${pattern})$`, 'v'), `${file}: pattern="${pattern}"`).not.toThrow();
    }
  });

  it('the sign-in user ID pattern accepts a user ID and refuses what the server refuses', () => {
    const page = readFileSync(new URL('../../demo/index.html', import.meta.url), 'utf8');
    const userPattern = /<input id="signin-user"[^>]*\spattern="([^"]*)"/.exec(page)![1]!;
    const re = new RegExp(`^(?:${userPattern})$`, 'v');
    expect(re.test('alice')).toBe(true);
    expect(re.test('carol-web.1')).toBe(true);
    for (const bad of ['bad{id}', 'a b', '{']) expect(re.test(bad), bad).toBe(false);
  });
});
