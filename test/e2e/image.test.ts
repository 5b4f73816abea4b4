import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { configSchema } from '../../src/config/config.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { REPO_ROOT } from '../support/server.js';
import { buildDockerfile, dockerignore, type BuildResult } from '../support/dockerfile.js';
import { nodeOnTrixie } from '../support/otherNode.js';
import { TEST_JWT_SECRET } from '../support/tokens.js';
import { waitUntil } from './helpers.js';

/**
 * The Docker image (docs/operations.md "Deployment"), as far as a machine without a Docker engine allows:
 * the Dockerfile's stages are run instruction by instruction (test/support/dockerfile.ts), the
 * image's filesystem is checked (production dependencies only), and its CMD is started with the
 * image's Node.js 24 on Debian trixie's glibc (test/support/otherNode.ts): it gets ready, passes
 * its own HEALTHCHECK and stops cleanly on SIGTERM. docker-compose.yml and the proxy
 * configuration are checked against what the server reads.
 */

let work: string;
let built: BuildResult;
let redis: RedisServer;

/** Node 24 on glibc 2.41: made in beforeAll, as on a fresh machine it takes minutes (debootstrap). */
let node24: string[];

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'image-'));
  node24 = nodeOnTrixie(24);
  built = buildDockerfile(REPO_ROOT, work);
  redis = await startRedis();
}, 600_000);

afterAll(async () => {
  await redis?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

const imageRoot = () => join(built.image.root, built.image.workdir);

describe('Dockerfile', () => {
  it('is multi-stage on Node 24 over a glibc ≥ 2.38 base, and runs as a non-root user', () => {
    expect(built.stages.map((s) => s.name)).toEqual(['build', 'runtime']);
    for (const s of built.stages) expect(s.from).toMatch(/^node:24-trixie(-slim)?$/);
    expect(built.image.user).toBe('node');
    expect(built.image.env.NODE_ENV).toBe('production');
    expect(built.image.cmd).toEqual(['node', 'dist/src/main.js']);
    expect(built.image.healthcheck?.join(' ')).toMatch(/\/readyz/);
  });

  it('the image holds production dependencies only, and the compiled server with its Lua scripts', () => {
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
    const modules = join(imageRoot(), 'node_modules');
    for (const dep of Object.keys(pkg.dependencies)) expect(existsSync(join(modules, dep)), dep).toBe(true);
    for (const dev of ['typescript', 'vitest', 'tsx', 'playwright-core']) expect(existsSync(join(modules, dev)), dev).toBe(false);
    expect(Object.keys(pkg.devDependencies)).toContain('typescript');
    // npm ci's postinstall mended ioredis in the image too (scripts/patch-dependencies.mjs).
    expect(readFileSync(join(modules, 'ioredis/built/Pipeline.js'), 'utf8')).toContain('Patched by scripts/patch-dependencies.mjs');
    expect(existsSync(join(imageRoot(), 'dist/src/main.js'))).toBe(true);
    expect(existsSync(join(imageRoot(), 'lua/createCall.lua'))).toBe(true);
    expect(existsSync(join(imageRoot(), 'demo/index.html'))).toBe(true);
    // Nothing of the build stage's sources or tests.
    for (const absent of ['src', 'test', 'tsconfig.json']) expect(existsSync(join(imageRoot(), absent)), absent).toBe(false);
  });

  it('.dockerignore keeps secrets, state and bulk out of the build context', () => {
    const ignored = dockerignore(readFileSync(join(REPO_ROOT, '.dockerignore'), 'utf8'));
    for (const p of ['.git', 'node_modules', 'node_modules/x/y.js', '.env', '.env.local', '.data/redis', 'AuthKey_ABC.p8', 'dist']) expect(ignored(p), p).toBe(true);
    for (const p of ['src/main.ts', 'lua/createCall.lua', 'package.json', 'package-lock.json', 'packages/client/package.json']) expect(ignored(p), p).toBe(false);
  });

  it('the CMD starts on Node 24 with the real uWebSockets.js, passes its HEALTHCHECK, and stops cleanly on SIGTERM', async () => {
    const [nodeBin, ...nodeArgs] = node24;
    const swapNode = (argv: string[]) => (argv[0] === 'node' ? [nodeBin!, ...nodeArgs, ...argv.slice(1)] : argv);
    // The image's environment, and what compose would add (a Redis, a key); loopback ports here.
    const env = { PATH: process.env.PATH ?? '', ...built.image.env, REDIS_URL: redis.url, AUTH_JWT_SECRET: TEST_JWT_SECRET, HOST: '127.0.0.1', PORT: '0', METRICS_PORT: '0' };
    const [cmd, ...argv] = swapNode(built.image.cmd!);
    const child: ChildProcess = spawn(cmd!, argv, { cwd: imageRoot(), env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      await waitUntil(`the image's server listening; output: ${output}`, () => /"msg":"listening"/.test(output), 30_000);
      const listening = JSON.parse(output.split('\n').find((l) => l.includes('"msg":"listening"'))!) as { port: number; uws: string; node: string };
      expect(listening.uws).toBe('@btc-vision/uwebsockets.js@20.57.0');
      expect(listening.node).toMatch(/^v24\./);
      const [hcCmd, ...hcArgs] = swapNode(built.image.healthcheck!);
      await waitUntil('the HEALTHCHECK passing', () => spawnSync(hcCmd!, hcArgs, { env: { ...env, PORT: String(listening.port) } }).status === 0, 10_000);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(output).toMatch(/"msg":"shutting down"/);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

describe('docker-compose.yml', () => {
  type Service = { image?: string; build?: unknown; environment?: Record<string, string | number>; command?: string[] | string; profiles?: string[] };
  const compose = () => parse(readFileSync(join(REPO_ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, Service> };

  it('builds the image once and runs it as two api+gateway replicas and a worker, behind a proxy, on Redis with AOF and hz 100', () => {
    const { services } = compose();
    const app = ['api-1', 'api-2', 'worker'];
    for (const name of app) expect(services[name]?.image, name).toBe('calling-backend:local');
    expect(Object.entries(services).filter(([, s]) => s.build !== undefined).map(([n]) => n)).toEqual(['api-1']);
    expect(app.map((n) => services[n]!.environment!.ROLES)).toEqual(['api,gateway', 'api,gateway', 'worker']);
    const redisCmd = (services.redis!.command as string[]).join(' ');
    expect(redisCmd).toMatch(/--appendonly yes/);
    expect(redisCmd).toMatch(/--hz 100/);
    expect(services.proxy).toBeDefined();
  });

  it('passes only variables the server reads (or the OpenTelemetry SDK does)', () => {
    const known = new Set(Object.keys(configSchema.shape));
    const { services } = compose();
    for (const name of ['api-1', 'api-2', 'worker']) {
      const unknown = Object.keys(services[name]!.environment!).filter((k) => !known.has(k) && !k.startsWith('OTEL_'));
      expect(unknown, name).toEqual([]);
    }
  });

  it('has a cluster profile: three cluster-enabled Redis nodes and a one-shot cluster create', () => {
    const { services } = compose();
    const nodes = Object.entries(services).filter(([, s]) => s.profiles?.includes('cluster'));
    expect(nodes.map(([n]) => n).sort()).toEqual(['redis-c1', 'redis-c2', 'redis-c3', 'redis-cluster-init']);
    for (const n of ['redis-c1', 'redis-c2', 'redis-c3']) expect((services[n]!.command as string[]).join(' ')).toMatch(/--cluster-enabled yes/);
    expect(String(services['redis-cluster-init']!.command)).toMatch(/--cluster create/);
  });

  it('the proxy balances HTTP and WebSocket over both replicas on the port the image listens on, checking /readyz', () => {
    const cfg = readFileSync(join(REPO_ROOT, 'deploy/haproxy/haproxy.cfg'), 'utf8');
    const servers = [...cfg.matchAll(/^\s*server (\S+) (\S+):(\d+)/gm)].map((m) => [m[1], m[2], m[3]]);
    expect(servers).toEqual([
      ['api-1', 'api-1', built.image.env.PORT],
      ['api-2', 'api-2', built.image.env.PORT],
    ]);
    expect(cfg).toMatch(/option httpchk GET \/readyz/);
    expect(cfg).toMatch(/timeout tunnel/); // upgraded WebSocket connections stay open
    expect(cfg).toMatch(/option forwardfor/);
  });
});
