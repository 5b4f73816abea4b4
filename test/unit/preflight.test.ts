import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * scripts/preflight.mjs (docs/development.md "What the commands need"): with a PATH that holds only
 * node, and installing switched off as for a user without sudo, each command stops at once with
 * one message naming every missing tool and the command that installs it.
 */

const bare = mkdtempSync(join(tmpdir(), 'preflight-'));
symlinkSync(process.execPath, join(bare, 'node'));
afterAll(() => rmSync(bare, { recursive: true, force: true }));

function preflight(mode: string, env: Record<string, string> = {}) {
  const script = new URL('../../scripts/preflight.mjs', import.meta.url).pathname;
  return spawnSync(join(bare, 'node'), [script, mode], { env: { PATH: bare, PREFLIGHT_NO_INSTALL: '1', ...env }, encoding: 'utf8' });
}

describe('preflight', () => {
  it('npm test: names each missing tool and the apt-get command, exit 1', () => {
    const r = preflight('test');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/missing redis-server, curl, chromium, turnserver and turnutils_uclient/);
    expect(r.stderr).toContain('apt-get install -y --no-install-recommends redis-server curl chromium coturn');
    expect(r.stderr).toContain('test/e2e/client-browser.test.ts');
  });

  it('npm run test:fast needs only redis-server and curl; a CHROMIUM_PATH that exists counts as chromium', () => {
    const fast = preflight('fast');
    expect(fast.status).toBe(1);
    expect(fast.stderr).toMatch(/missing redis-server, curl\.\n/);
    expect(fast.stderr).not.toContain('chromium');
    const test = preflight('test', { CHROMIUM_PATH: process.execPath });
    expect(test.stderr).not.toMatch(/missing[^\n]*chromium/);
  });

  it('npm run dev needs redis-server only without REDIS_URL', () => {
    expect(preflight('dev').status).toBe(1);
    const withUrl = preflight('dev', { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(withUrl.status).toBe(0);
    expect(withUrl.stderr).toBe('');
  });
});
