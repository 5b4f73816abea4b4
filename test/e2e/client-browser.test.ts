import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { startStack, type Stack } from '../support/stack.js';
import { REPO_ROOT } from '../support/server.js';
import { tokenFor } from '../support/tokens.js';
import { uid } from '../support/fixtures.js';

/**
 * The client package in a real browser (headless Chromium): a page served from its own origin
 * loads the compiled package (and msgpackr's browser build through an import map) and makes a
 * whole call against a server on another origin, so every request crosses CORS (docs/api.md "CORS")
 * and the signaling sockets pass the WS_CHECK_ORIGIN check with the token in the URL. A refused
 * token is recognised by the browser path (one HTTP check), and start() rejects.
 */

const run = promisify(execFile);
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

let stack: Stack;
let page: Server;
let pageOrigin: string;
let browser: Browser;
let built: string;

const TYPES: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.map': 'application/json' };

const INDEX = `<!doctype html>
<script type="importmap">{ "imports": { "msgpackr": "/msgpackr/index.js" } }</script>
<script type="module">
  import * as client from '/client/index.js';
  window.client = client;
  window.ready = true;
</script>`;

/** Serves the page, the compiled client (/client/) and msgpackr's browser files (/msgpackr/). */
function servePage(): Promise<Server> {
  const roots: Record<string, string> = { client: built, msgpackr: join(REPO_ROOT, 'node_modules/msgpackr') };
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path === '/') {
      res.writeHead(200, { 'content-type': 'text/html' }).end(INDEX);
      return;
    }
    const [, top, ...rest] = path.split('/');
    const base = roots[top ?? ''];
    const file = base ? normalize(join(base, ...rest)) : '';
    if (!base || !file.startsWith(base) || !existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

beforeAll(async () => {
  built = mkdtempSync(join(tmpdir(), 'client-browser-'));
  await run(join(REPO_ROOT, 'node_modules/.bin/tsc'), ['-p', 'packages/client/tsconfig.json', '--outDir', built], { cwd: REPO_ROOT });
  page = await servePage();
  const addr = page.address();
  pageOrigin = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  stack = await startStack({ CORS_ORIGINS: pageOrigin, WS_CHECK_ORIGIN: 'true' });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  await new Promise((r) => (page ? page.close(r) : r(undefined)));
  if (built) rmSync(built, { recursive: true, force: true });
});

interface CallResult {
  created: { callId: string; state: string };
  answered: { state: string; answeredByInstallationId: string };
  ended: { state: string; endReason: string };
  seen: { caller: { type: string }[]; callee: { type: string; reason?: string }[] };
  refused: { name: string; failure: { status: number; detail: string } };
}

describe('the client package in a browser', () => {
  it('makes a whole call across origins (CORS, origin-checked signaling, msgpack), and stops on a refused token', async () => {
    const tab = await browser.newPage();
    const errors: string[] = [];
    tab.on('pageerror', (e) => errors.push(String(e)));
    await tab.goto(`${pageOrigin}/`);
    await tab.waitForFunction(() => (globalThis as unknown as { ready?: boolean }).ready === true, undefined, { timeout: 20_000 });

    const caller = { userId: uid('caller'), installationId: uid('caller-browser') };
    const callee = { userId: uid('callee'), installationId: uid('callee-browser') };
    const args = {
      api: stack.url,
      callerToken: tokenFor(caller),
      calleeToken: tokenFor(callee),
      badToken: tokenFor(callee, 'another-secret-0123456789abcdef-0123456789'),
      calleeUserId: callee.userId,
      calleeInstallation: callee.installationId,
    };
    const result = (await tab.evaluate(async (a) => {
      const { CallingClient, SignalingClient } = (globalThis as any).client;
      const wsUrl = a.api.replace(/^http/, 'ws');
      const seen: { caller: any[]; callee: any[] } = { caller: [], callee: [] };
      const until = async (what: string, done: () => boolean) => {
        for (const deadline = Date.now() + 15_000; !done(); await new Promise((r) => setTimeout(r, 20))) {
          if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        }
      };
      const callerApi = new CallingClient({ baseUrl: a.api, token: a.callerToken });
      const calleeApi = new CallingClient({ baseUrl: a.api, token: a.calleeToken });
      const callerSig = new SignalingClient({ url: wsUrl, token: a.callerToken, onEvent: (e: unknown) => seen.caller.push(e) });
      const calleeSig = new SignalingClient({ url: wsUrl, token: a.calleeToken, encoding: 'msgpack', onEvent: (e: unknown) => seen.callee.push(e) });
      await Promise.all([callerSig.start(), calleeSig.start()]);
      const created = await callerApi.createCall({ calleeUserId: a.calleeUserId, video: true });
      await until('the invitation', () => seen.callee.length >= 1);
      const answered = await calleeApi.answer(created.callId, { installationId: a.calleeInstallation });
      await until('the acceptance', () => seen.caller.length >= 1);
      const ended = await callerApi.end(created.callId, { reason: 'localHangup' });
      await until('the hang-up', () => seen.callee.length >= 2);
      callerSig.stop();
      calleeSig.stop();
      const bad = new SignalingClient({ url: wsUrl, token: a.badToken, onEvent: () => {} });
      const refused = await bad.start().then(
        () => ({ name: 'resolved', failure: { status: 0, detail: '' } }),
        (e: any) => ({ name: e.name, failure: e.failure }),
      );
      return { created, answered, ended, seen, refused };
    }, args)) as CallResult;

    expect(errors).toEqual([]);
    expect(result.created.state).toBe('ringing');
    expect(result.answered).toMatchObject({ state: 'accepted', answeredByInstallationId: callee.installationId });
    expect(result.ended).toMatchObject({ state: 'ended', endReason: 'localHangup' });
    expect(result.seen.caller.map((e) => e.type)).toEqual(['call.accepted']);
    expect(result.seen.callee.map((e) => `${e.type}${e.reason ? `/${e.reason}` : ''}`)).toEqual(['call.invited', 'call.ended/remoteEnded']);
    expect(result.refused).toEqual({ name: 'SignalingAuthError', failure: { status: 401, detail: 'token check answered 401' } });
    await tab.close();
  }, 120_000);
});
