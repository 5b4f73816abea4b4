import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { configSchema } from '../../src/config/config.js';
import { newServerKey } from '../../src/auth/serverKeys.js';
import { allSamples, pointedAt, type CodeBlock } from '../support/docSamples.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { REPO_ROOT } from '../support/server.js';
import { TEST_JWT_SECRET } from '../support/tokens.js';
import { waitUntil } from '../support/wait.js';
import { newSecret } from '../support/webhook-receiver.js';

/**
 * The code samples of the pages a reader pastes from, run as a reader runs them
 * (docs/development.md "Code samples"): the webhook receiver of docs/webhooks.md is started with
 * node, `npm run dev` is started as the README says (on a free port, with this file's own Redis,
 * a server API key, and the receiver as its webhook endpoint), and then each page's shell
 * samples run in one bash session, each program sample with node or tsx (TypeScript also
 * type-checked), all against that server with the tokens `npm run dev` printed. A sample that
 * drifts from the code fails here: a wrong path or body is an HTTP error (curl --fail-with-body,
 * a thrown ProblemError), a wrong option a type error, and a receiver that does not verify real
 * deliveries prints none of them.
 */

const samples = allSamples();
const shellPages = [...new Set(samples.filter((s) => s.sample.kind === 'shell').map((s) => s.page))];
const programs = samples.filter((s) => s.sample.kind === 'program');
const receiverSample = samples.find((s) => s.sample.kind === 'webhook-receiver')!;

interface Proc {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** Spawns a process in a group of its own (npm runs the server as a grandchild), collecting its output. */
function run(cmd: string, args: string[], env: Record<string, string>): Proc {
  const child = spawn(cmd, args, { cwd: REPO_ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

/** Stops a process group this file started: SIGTERM, then SIGKILL if it lingers. */
async function stop(p: Proc | undefined): Promise<void> {
  if (!p || p.child.exitCode !== null || p.child.signalCode !== null) return;
  const group = -p.child.pid!;
  process.kill(group, 'SIGTERM');
  const timer = setTimeout(() => process.kill(group, 'SIGKILL'), 10_000);
  await p.exited;
  clearTimeout(timer);
}

/** The environment outside the configuration (PATH, HOME, npm's), without any configuration variable. */
function baseEnv(): Record<string, string> {
  const configKeys = new Set(Object.keys(configSchema.shape));
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !configKeys.has(k)) env[k] = v;
  return env;
}

const where = (b: CodeBlock) => `${b.page}:${b.line}`;

let redis: RedisServer;
let scratch: string;
let receiver: Proc | undefined;
let dev: Proc | undefined;
let port: number;
/** What the samples' shell has set: the tokens `npm run dev` printed, the server API key. */
let sampleEnv: Record<string, string>;
const webhookSecret = newSecret();

beforeAll(async () => {
  redis = await startRedis();
  mkdirSync(join(REPO_ROOT, '.scratch'), { recursive: true });
  // Inside the repository, so the samples' imports (standardwebhooks, jose, ws, the client) resolve.
  scratch = mkdtempSync(join(REPO_ROOT, '.scratch', 'doc-samples-'));

  const receiverFile = join(scratch, 'receiver.mjs');
  writeFileSync(receiverFile, receiverSample.text);
  receiver = run(process.execPath, [receiverFile], { ...baseEnv(), CALLS_WEBHOOK_SECRET: webhookSecret, PORT: '0' });
  await waitUntil('the receiver sample listens', () => /listening on \d+/.test(receiver!.output()), 10_000);
  const receiverPort = Number(/listening on (\d+)/.exec(receiver.output())![1]);

  const key = newServerKey();
  dev = run('npm', ['run', 'dev'], {
    ...baseEnv(),
    // What the README's `npm run dev` gets, but on free ports and this file's Redis.
    PORT: '0',
    HOST: '127.0.0.1',
    METRICS_PORT: '0',
    REDIS_URL: redis.url,
    AUTH_JWT_SECRET: TEST_JWT_SECRET,
    SERVER_API_KEYS: key.hash,
    WEBHOOKS: JSON.stringify([{ id: 'samples', url: `http://127.0.0.1:${receiverPort}/`, secret: webhookSecret }]),
  });
  await waitUntil('npm run dev prints the dev tokens', () => /BOB=\S+/.test(dev!.output()) || dev!.child.exitCode !== null, 30_000).catch(() => {});
  const out = dev.output();
  expect(out, out).toMatch(/BOB=\S+/);
  port = Number(/"msg":"listening"[^\n]*"port":(\d+)|"port":(\d+)[^\n]*"msg":"listening"/.exec(out)?.slice(1).find(Boolean));
  expect(port, out).toBeGreaterThan(0);
  sampleEnv = {
    ...baseEnv(),
    ALICE: /ALICE=(\S+)/.exec(out)![1]!,
    BOB: /BOB=(\S+)/.exec(out)![1]!,
    SERVER_KEY: key.key,
    AUTH_JWT_SECRET: TEST_JWT_SECRET,
  };
}, 90_000);

afterAll(async () => {
  await stop(dev);
  await stop(receiver);
  await redis?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/** Runs bash with `script` (-e, -u, pipefail) as the samples' shell. */
async function bash(script: string): Promise<{ code: number | null; output: string }> {
  const p = run('bash', ['-euo', 'pipefail', '-c', script], sampleEnv);
  const code = await p.exited;
  return { code, output: p.output() };
}

describe('code samples (docs/development.md "Code samples")', () => {
  it('the lines `npm run dev` prints under "Try:" run, and run again', async () => {
    const printed = /\nTry:[^\n]*\n((?:[ \t]+\S.*\n)+)/.exec(dev!.output())?.[1];
    expect(printed, dev!.output()).toBeDefined();
    for (let paste = 1; paste <= 2; paste++) {
      const { code, output } = await bash(`${pointedAt(printed!, port)}\necho`);
      expect(code, output).toBe(0);
      const [body, status] = output.trim().split(/\n(?=HTTP \d+$)/);
      expect(status, output).toBe('HTTP 201');
      expect(JSON.parse(body!)).toMatchObject({ state: 'ringing', calleeUserId: 'bob' });
    }
  });

  it.each(shellPages)('%s: its shell samples run in order in one session', async (page) => {
    const blocks = samples.filter((s) => s.page === page && s.sample.kind === 'shell');
    const script = blocks.map((b) => `# ${where(b)}\n${pointedAt(b.text, port)}`).join('\n');
    const { code, output } = await bash(script);
    expect(code, `${blocks.map(where).join(', ')} exited ${code}:\n${output}`).toBe(0);
  });

  it.each(programs.map((p) => [where(p), p] as const))('%s: the program runs', async (_where, sample) => {
    const ext = sample.lang === 'ts' ? 'ts' : 'mjs';
    const file = join(scratch, `${sample.page.replace(/\W+/g, '-')}-${sample.line}.${ext}`);
    writeFileSync(file, pointedAt(sample.text, port));
    if (sample.lang === 'ts') {
      // Type-checked with the repository's settings: an option the package no longer has fails here.
      writeFileSync(join(scratch, 'tsconfig.json'), JSON.stringify({ extends: relative(scratch, join(REPO_ROOT, 'tsconfig.json')), compilerOptions: { noEmit: true }, include: [file] }));
      const tsc = run(process.execPath, [join(REPO_ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(scratch, 'tsconfig.json')], baseEnv());
      expect(await tsc.exited, tsc.output()).toBe(0);
    }
    const p = run(process.execPath, [...(sample.lang === 'ts' ? ['--import', 'tsx'] : []), file], sampleEnv);
    const code = await p.exited;
    expect(code, `${where(sample)} exited ${code}:\n${p.output()}`).toBe(0);
  });

  it(`${where(receiverSample)}: the webhook receiver verifies the deliveries the samples caused, each once, and refuses a forged one`, async () => {
    // The samples above made full calls (created, accepted, ended): the receiver prints each
    // verified event as "<webhook-id> <type> <callId>" once.
    const printed = () =>
      receiver!
        .output()
        .split('\n')
        .map((l) => /^(msg_\S+) (\S+) /.exec(l))
        .filter((m): m is RegExpExecArray => m !== null);
    await waitUntil('the receiver printed call.created, call.accepted and call.ended', () => {
      const types = new Set(printed().map((m) => m[2]));
      return ['call.created', 'call.accepted', 'call.ended'].every((t) => types.has(t));
    }, 20_000);
    const ids = printed().map((m) => m[1]);
    expect(new Set(ids).size).toBe(ids.length);

    const receiverUrl = `http://127.0.0.1:${Number(/listening on (\d+)/.exec(receiver!.output())![1])}/`;
    const body = JSON.stringify({ type: 'call.ended', timestamp: new Date().toISOString(), data: { callId: 'forged-call' } });
    const post = (secret: string, id: string, text = body) => {
      const now = new Date();
      return fetch(receiverUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(Math.floor(now.getTime() / 1000)), 'webhook-signature': new Webhook(secret).sign(id, now, body) },
        body: text,
      });
    };
    // Signed with another secret, or altered after signing: refused, and not handled.
    expect((await post(newSecret(), 'msg_forged')).status).toBe(400);
    expect((await post(webhookSecret, 'msg_altered', body.replace('forged-call', 'other-call'))).status).toBe(400);
    // Signed with the endpoint's secret: handled once, however often it comes.
    expect((await post(webhookSecret, 'msg_twice')).status).toBe(204);
    expect((await post(webhookSecret, 'msg_twice')).status).toBe(204);
    const handled = printed().map((m) => m[1]);
    expect(handled.filter((id) => id === 'msg_twice')).toEqual(['msg_twice']);
    expect(handled).not.toContain('msg_forged');
    expect(handled).not.toContain('msg_altered');
  });
});
