import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';

/**
 * The dependency patch npm's postinstall applies (scripts/patch-dependencies.mjs, docs/development.md
 * "Installed dependency patch") is in place, and ioredis's pipelines behave as it intends.
 */

const REPO_ROOT = join(import.meta.dirname, '../..');

describe('installed dependency patch', () => {
  it('every patch is applied to the installed dependencies', () => {
    // Exits 1 (and execFileSync throws) when a patch is missing or its code changed upstream.
    const out = execFileSync(process.execPath, ['scripts/patch-dependencies.mjs', '--check'], { cwd: REPO_ROOT, encoding: 'utf8' });
    expect(out).toContain('ioredis Pipeline: `length` as a prototype getter: already applied');
  });

  it('an ioredis pipeline has no getter of its own, and its length still counts its commands', () => {
    // Never connects: a pipeline that is not executed sends nothing.
    const redis = new Redis({ port: 1, lazyConnect: true });
    try {
      const a = redis.pipeline().set('k', 'v').get('k');
      const b = redis.pipeline();
      // A getter of its own, a closure per pipeline, is what kept every pipeline alive (the patch's
      // comment says how): none may be left.
      expect(Object.getOwnPropertyDescriptor(a, 'length')).toBeUndefined();
      expect(a.length).toBe(2);
      expect(b.length).toBe(0);
    } finally {
      redis.disconnect();
    }
  });
});
