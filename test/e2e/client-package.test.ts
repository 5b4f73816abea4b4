import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync, existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { REPO_ROOT } from '../support/server.js';
import { tokenFor } from '../support/tokens.js';
import { uid } from '../support/fixtures.js';

/**
 * The client package as an app developer gets it (docs/development.md "Client package"): `npm pack` of
 * packages/client (its prepack builds dist/), installed from the tarball into an empty project
 * outside the repo, then a plain Node script in that project makes a real call against a real
 * server: HTTP for create/answer/end, signaling (with the `ws` class injected, token in a header)
 * for the events. A TypeScript consumer is type-checked against the package's own declarations.
 */

const run = promisify(execFile);
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';

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
import { CallingClient, SignalingClient } from '@calling-backend/client';

const [baseUrl, callerToken, calleeToken, calleeUserId, wsModule] = process.argv.slice(2);
const { default: WebSocket } = await import(wsModule);
const caller = new CallingClient({ baseUrl, token: callerToken });
const callee = new CallingClient({ baseUrl, token: calleeToken });
const seen = { caller: [], callee: [] };
const signaling = (token, list) =>
  new SignalingClient({ url: baseUrl.replace(/^http/, 'ws'), token, WebSocket, onEvent: (e) => list.push(e) });
const a = signaling(callerToken, seen.caller);
const b = signaling(calleeToken, seen.callee);
await Promise.all([a.start(), b.start()]);
const until = async (what, done) => {
  for (const deadline = Date.now() + 15000; !done(); await new Promise((r) => setTimeout(r, 20))) {
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what);
  }
};
const created = await caller.createCall({ calleeUserId, video: true });
await until('the invitation', () => seen.callee.length >= 1);
const answered = await callee.answer(created.callId, { installationId: process.env.CALLEE_INSTALLATION });
await until('the acceptance', () => seen.caller.length >= 1);
const media = await caller.mediaSession(created.callId);
const ended = await caller.end(created.callId, { reason: 'localHangup' });
await until('the hang-up', () => seen.callee.length >= 2);
a.stop();
b.stop();
process.stdout.write(JSON.stringify({ created, answered, ended, media, seen }));
`;

const TYPED_CONSUMER = `
import { CallingClient, SignalingClient, ProblemError, type CallSnapshot, type EventPayload } from '@calling-backend/client';
const api = new CallingClient({ baseUrl: 'http://127.0.0.1:1', token: () => 't' });
const snap: Promise<CallSnapshot> = api.getCall('c');
const handle = (e: EventPayload): string => (e.type === 'call.invited' ? e.issuedAtMs.toFixed() : e.occurredAtMs.toFixed());
const s = new SignalingClient({ url: 'ws://127.0.0.1:1', token: 't', onEvent: (e) => void handle(e), onAuthFailure: () => undefined });
export { snap, s, ProblemError };
`;

describe('the packed client package', () => {
  it('installs from its tarball into an empty project and makes a real call', async () => {
    // Pack (prepack builds dist/).
    const packed = await run(NPM, ['pack', '-w', 'packages/client', '--pack-destination', work, '--json'], { cwd: REPO_ROOT, maxBuffer: 16 << 20 });
    // Lifecycle output (prepack) may precede the JSON report.
    const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['), packed.stdout.lastIndexOf(']') + 1)) as { filename: string; files: { path: string }[] }[];
    const files = info!.files.map((f) => f.path).sort();
    expect(files).toEqual(expect.arrayContaining(['package.json', 'dist/index.js', 'dist/index.d.ts', 'dist/signaling.js', 'dist/http.js']));
    expect(files.every((f) => /^(package\.json|README\.md|dist\/|src\/)/.test(f)), files.join(' ')).toBe(true);
    const tarball = join(work, info!.filename.replace(/^@/, '').replace(/\//, '-'));
    expect(existsSync(tarball), `${tarball} in ${readdirSync(work).join(' ')}`).toBe(true);

    // An empty project outside the repo, with nothing but the tarball installed.
    const app = join(work, 'app');
    await run('mkdir', ['-p', app]);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }));
    await run(NPM, ['install', tarball, '--no-audit', '--no-fund', '--prefer-offline'], { cwd: app, maxBuffer: 16 << 20 });
    const installed = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(Object.keys(installed.dependencies)).toEqual(['@calling-backend/client']);
    // No server dependency came along.
    for (const serverDep of ['ioredis', 'bullmq', 'uWebSockets.js', 'zod', 'pino']) expect(existsSync(join(app, 'node_modules', serverDep)), serverDep).toBe(false);

    // A real call through the installed package. `ws` (Node 20 has no global WebSocket) is the
    // only thing the script takes from elsewhere: it is injected, as README says.
    writeFileSync(join(app, 'call.mjs'), CONSUMER);
    const callerId = { userId: uid('caller'), installationId: uid('caller-phone') };
    const callee = { userId: uid('callee'), installationId: uid('callee-phone') };
    const wsModule = pathToFileURL(join(REPO_ROOT, 'node_modules/ws/wrapper.mjs')).href;
    const out = await run(process.execPath, ['call.mjs', stack.url, tokenFor(callerId), tokenFor(callee), callee.userId, wsModule], {
      cwd: app,
      env: { ...process.env, CALLEE_INSTALLATION: callee.installationId },
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

    // The declarations serve a strict TypeScript consumer (NodeNext resolution, no DOM, no Node types).
    writeFileSync(join(app, 'typed.ts'), TYPED_CONSUMER);
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', lib: ['es2022'], types: [] },
        files: ['typed.ts'],
      }),
    );
    const tsc = await run(join(REPO_ROOT, 'node_modules/.bin/tsc'), ['-p', 'tsconfig.json'], { cwd: app }).catch((e: { stdout?: string }) => e);
    expect((tsc as { stdout?: string }).stdout ?? '').toBe('');
  }, 240_000);
});
