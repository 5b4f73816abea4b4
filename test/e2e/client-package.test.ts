import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync, existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { REPO_ROOT } from '../support/server.js';
import { tokenFor } from '../support/tokens.js';
import { uid } from '../support/fixtures.js';

/**
 * The client package as an app developer gets it (docs/development.md "Client package"): its
 * source (the files git tracks in packages/client) copied out of the repository and packed there
 * with nothing but its own package.json's dependencies from the registry (so its build needs
 * nothing of the repository, and writes nothing into it), then the tarball installed into an
 * empty project outside the repo with only the registry besides, where a TypeScript app is
 * type-checked under `tsc --strict` against the package's declarations and run against a real
 * server: HTTP for create/answer/end, signaling (the `ws` class injected, token in a header) for
 * the events.
 */

const run = promisify(execFile);
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const INSTALL = ['--no-audit', '--no-fund', '--prefer-offline'];

let stack: Stack;
let work: string;

beforeAll(async () => {
  stack = await startStack();
  work = mkdtempSync(join(tmpdir(), 'client-package-'));
});

afterAll(async () => {
  await stack?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

const CONSUMER = `
import WebSocket from 'ws';
import { CallingClient, SignalingClient, type EventPayload } from '@calling-backend/client';

const [baseUrl, callerToken, calleeToken, calleeUserId, calleeInstallation] = process.argv.slice(2) as [string, string, string, string, string];
const caller = new CallingClient({ baseUrl, token: callerToken });
const callee = new CallingClient({ baseUrl, token: calleeToken });
const seen: { caller: EventPayload[]; callee: EventPayload[] } = { caller: [], callee: [] };
const signaling = (token: string, list: EventPayload[]) =>
  new SignalingClient({ url: baseUrl.replace(/^http/, 'ws'), token, WebSocket, onEvent: (e) => list.push(e) });
const a = signaling(callerToken, seen.caller);
const b = signaling(calleeToken, seen.callee);
await Promise.all([a.start(), b.start()]);
const until = async (what: string, done: () => boolean) => {
  for (const deadline = Date.now() + 15000; !done(); await new Promise((r) => setTimeout(r, 20))) {
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what);
  }
};
const created = await caller.createCall({ calleeUserId, video: true });
await until('the invitation', () => seen.callee.length >= 1);
const answered = await callee.answer(created.callId, { installationId: calleeInstallation });
await until('the acceptance', () => seen.caller.length >= 1);
const media = await caller.mediaSession(created.callId);
const ended = await caller.end(created.callId, { reason: 'localHangup' });
await until('the hang-up', () => seen.callee.length >= 2);
a.stop();
b.stop();
process.stdout.write(JSON.stringify({ created, answered, ended, media, seen }));
`;

describe('the packed client package', () => {
  it('packs outside the repo with its own build dependencies, installs from its tarball into an empty project, type-checks strictly and makes a real call', async () => {
    // The package's files as git sees them, copied out of the repository.
    // (Files not yet added count too; ignored ones such as dist/ and node_modules/ do not.)
    const status = async () => (await run('git', ['status', '--porcelain', '--ignored', '--', 'packages/client'], { cwd: REPO_ROOT })).stdout;
    const statusBefore = await status();
    const tracked = (await run('git', ['ls-files', '--cached', '--others', '--exclude-standard', 'packages/client'], { cwd: REPO_ROOT })).stdout.split('\n').filter(Boolean);
    const pkg = join(work, 'pkg');
    for (const file of tracked) cpSync(join(REPO_ROOT, file), join(pkg, file.slice('packages/client/'.length)));
    const manifest = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as { version: string; devDependencies?: Record<string, string> };
    expect(Object.keys(manifest.devDependencies ?? {})).toContain('typescript');
    expect(readFileSync(join(pkg, 'CHANGELOG.md'), 'utf8')).toContain(`## ${manifest.version}`);
    // Its own dependencies from the registry, then pack (prepack builds dist/ with its own tsc).
    await run(NPM, ['install', ...INSTALL], { cwd: pkg, maxBuffer: 16 << 20 });
    const packed = await run(NPM, ['pack', '--json'], { cwd: pkg, maxBuffer: 16 << 20 });
    // Lifecycle output (prepack) may precede the JSON report.
    const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['), packed.stdout.lastIndexOf(']') + 1)) as { filename: string; files: { path: string }[] }[];
    const files = info!.files.map((f) => f.path).sort();
    expect(files).toEqual(expect.arrayContaining(['package.json', 'CHANGELOG.md', 'README.md', 'dist/index.js', 'dist/index.d.ts', 'dist/signaling.js', 'dist/http.js']));
    expect(files.every((f) => /^(package\.json|README\.md|CHANGELOG\.md|dist\/|src\/)/.test(f)), files.join(' ')).toBe(true);
    const tarball = join(pkg, info!.filename.replace(/^@/, '').replace(/\//, '-'));
    expect(existsSync(tarball), `${tarball} in ${readdirSync(pkg).join(' ')}`).toBe(true);

    // An empty project outside the repo: the tarball, and from the registry `ws` (Node 20 has no
    // global WebSocket) and what a TypeScript app builds with.
    const app = join(work, 'app');
    await run('mkdir', ['-p', app]);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }));
    await run(NPM, ['install', tarball, 'ws@^8', ...INSTALL], { cwd: app, maxBuffer: 16 << 20 });
    await run(NPM, ['install', '-D', 'typescript@^5.9', '@types/ws@^8', '@types/node@^20', ...INSTALL], { cwd: app, maxBuffer: 16 << 20 });
    const installed = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(Object.keys(installed.dependencies).sort()).toEqual(['@calling-backend/client', 'ws']);
    // No server dependency came along.
    for (const serverDep of ['ioredis', 'bullmq', 'uWebSockets.js', 'zod', 'pino']) expect(existsSync(join(app, 'node_modules', serverDep)), serverDep).toBe(false);

    // The app type-checks under tsc --strict (NodeNext resolution, no DOM) against the package's declarations, and builds.
    writeFileSync(join(app, 'call.ts'), CONSUMER);
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { strict: true, outDir: 'out', module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', lib: ['es2022'], types: ['node'] },
        files: ['call.ts'],
      }),
    );
    const tsc = await run(join(app, 'node_modules/.bin/tsc'), ['-p', 'tsconfig.json'], { cwd: app }).catch((e: { stdout?: string }) => e);
    expect((tsc as { stdout?: string }).stdout ?? '').toBe('');

    // A real call through the installed package.
    const callerId = { userId: uid('caller'), installationId: uid('caller-phone') };
    const callee = { userId: uid('callee'), installationId: uid('callee-phone') };
    const out = await run(process.execPath, ['out/call.js', stack.url, tokenFor(callerId), tokenFor(callee), callee.userId, callee.installationId], {
      cwd: app,
      timeout: 60_000,
    });
    const result = JSON.parse(out.stdout) as {
      created: { callId: string; state: string };
      answered: { state: string; answeredByInstallationId: string };
      ended: { state: string; endReason: string };
      media: { iceServers: unknown[] };
      seen: { caller: { type: string }[]; callee: { type: string; reason?: string }[] };
    };
    expect(result.created.state).toBe('ringing');
    expect(result.answered).toMatchObject({ state: 'accepted', answeredByInstallationId: callee.installationId });
    expect(result.ended).toMatchObject({ state: 'ended', endReason: 'localHangup' });
    expect(result.media.iceServers).toEqual([]); // no TURN_URLS on this server
    expect(result.seen.caller.map((e) => e.type)).toEqual(['call.accepted']);
    expect(result.seen.callee.map((e) => `${e.type}${e.reason ? `/${e.reason}` : ''}`)).toEqual(['call.invited', 'call.ended/remoteEnded']);

    // Nothing of this was written into the repository.
    expect(await status()).toBe(statusBefore);
  }, 400_000);
});
