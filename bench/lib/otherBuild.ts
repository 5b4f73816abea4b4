import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from './processes.js';

/**
 * Another build of the server for `--compare-ref` (bench/README.md, "Comparing two builds"): the
 * git ref checked out into a temporary worktree, with its dependencies: this checkout's
 * node_modules when both lock files are the same, else its own `npm ci`. Removed by `remove`.
 */
export interface OtherBuild {
  ref: string;
  commit: string;
  root: string;
  /** How its dependencies came: shared with this checkout, or installed. */
  dependencies: 'shared' | 'installed';
  remove(): void;
}

const git = (args: string[], cwd = REPO_ROOT): string => execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

export function checkOut(ref: string, log: (line: string) => void): OtherBuild {
  const commit = git(['rev-parse', '--verify', `${ref}^{commit}`]);
  const root = join(mkdtempSync(join(tmpdir(), 'bench-compare-')), 'build');
  git(['worktree', 'add', '--detach', root, commit]);
  const remove = () => {
    try {
      git(['worktree', 'remove', '--force', root]);
    } catch {
      rmSync(root, { recursive: true, force: true });
      git(['worktree', 'prune']);
    }
  };
  try {
    const lock = (dir: string) => (existsSync(join(dir, 'package-lock.json')) ? readFileSync(join(dir, 'package-lock.json'), 'utf8') : '');
    let dependencies: OtherBuild['dependencies'] = 'shared';
    if (lock(root) === lock(REPO_ROOT)) symlinkSync(join(REPO_ROOT, 'node_modules'), join(root, 'node_modules'), 'dir');
    else {
      log(`  ${ref}: its package-lock.json differs from this checkout's: npm ci in ${root}`);
      execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
      dependencies = 'installed';
    }
    return { ref, commit, root, dependencies, remove };
  } catch (err) {
    remove();
    throw err;
  }
}

/** This checkout's commit, and whether it has changes not committed (they are measured too). */
export function thisBuild(): { commit: string; dirty: boolean } {
  return { commit: git(['rev-parse', 'HEAD']), dirty: git(['status', '--porcelain', '--untracked-files=no']) !== '' };
}
