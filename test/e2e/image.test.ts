import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { configSchema } from '../../src/config/config.js';
import { dockerUnavailable, makeBaseImages, makeStandIns, startDockerEngine, type DockerEngine } from '../support/docker.js';
import { answer, device, end, ringingCall } from '../support/fixtures.js';
import { freePort, startRedis, type RedisServer } from '../support/redis-server.js';
import { REPO_ROOT } from '../support/server.js';
import { TEST_JWT_SECRET } from '../support/tokens.js';
import { waitUntil } from '../support/wait.js';
import { closeAll, connect, type SignalingClient } from '../support/ws-client.js';

/**
 * The Docker image and the compose stack (docs/operations.md "The image", "The compose stack"),
 * built and run by a real Docker engine (test/support/docker.ts): the Dockerfile built unchanged,
 * the image's size and contents, the container serving a call against a test Redis and stopping
 * cleanly, then docker-compose.yml brought up with Debian's docker-compose and a call made through
 * its proxy. Root only (a daemon of its own); `npm run test:fast` leaves this file out.
 */

const IMAGE = 'calling-backend:local';
/** The bound on the image's size (docs/operations.md "The image"). */
const MAX_IMAGE_BYTES = 250_000_000;

const unavailable = dockerUnavailable();
if (unavailable !== undefined) console.warn(`test/e2e/image.test.ts: the Docker image and compose tests do not run here: ${unavailable}.`);

describe.runIf(unavailable === undefined)('the image, built and run by a real Docker engine', () => {
  let engine: DockerEngine;
  let redis: RedisServer;
  const sockets: SignalingClient[] = [];

  beforeAll(async () => {
    engine = await startDockerEngine();
    redis = await startRedis();
    await makeBaseImages(engine);
    // The Dockerfile as it is, with its default base images (made above under their names).
    await engine.docker(['build', '--network', 'host', '-t', IMAGE, REPO_ROOT], { timeoutMs: 600_000 });
  }, 900_000);

  afterAll(async () => {
    await closeAll(sockets);
    await engine?.stop();
    await redis?.stop();
  }, 120_000);

  it(`is at most ${MAX_IMAGE_BYTES / 1e6} MB, with one uWebSockets.js binary and production dependencies only`, async () => {
    const size = Number(await engine.docker(['image', 'inspect', '-f', '{{.Size}}', IMAGE]));
    console.log(`${IMAGE}: ${(size / 1e6).toFixed(1)} MB`);
    expect(size).toBeLessThanOrEqual(MAX_IMAGE_BYTES);
    const listing = `
      const fs = require('fs'), path = require('path');
      const files = (d) => fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => e.isDirectory() ? files(path.join(d, e.name)) : [path.join(d, e.name)]);
      console.log(JSON.stringify({
        app: fs.readdirSync('/app').sort(),
        uws: files('/app/node_modules').filter((f) => /uwebsockets|uWebSockets/.test(f) && f.endsWith('.node')),
        dev: ['typescript', 'vitest', 'tsx', 'playwright-core', '@calling-backend'].filter((p) => fs.existsSync('/app/node_modules/' + p)),
        maps: files('/app/node_modules').filter((f) => f.endsWith('.map') || f.endsWith('.d.ts')).length,
        patched: fs.readFileSync('/app/node_modules/ioredis/built/Pipeline.js', 'utf8').includes('Patched by scripts/patch-dependencies.mjs'),
      }));`;
    const contents = JSON.parse(await engine.docker(['run', '--rm', '--network', 'none', '--entrypoint', 'node', IMAGE, '-e', listing])) as Record<string, unknown>;
    expect(contents).toEqual({
      app: ['demo', 'dist', 'lua', 'node_modules', 'package.json'],
      uws: ['/app/node_modules/@btc-vision/uwebsockets.js/uws_linux_x64_137.node'],
      dev: [],
      maps: 0,
      patched: true,
    });
  });

  it('runs as a non-root user: healthy and ready, serves a call, and stops on SIGTERM with exit code 0', async () => {
    const [port, metricsPort] = [await freePort(), await freePort()];
    // Host networking: the container reaches the test Redis on loopback. The HEALTHCHECK's command
    // is the image's; only its interval is shortened. REDIS_COMMAND_TIMEOUT_MS is 5 s, as for every
    // server the tests start (test/support/server.ts): on a CI machine starved by a browser suite
    // beside it, the container's first create once waited past the default 500 ms and answered 503.
    const id = (
      await engine.docker(['run', '-d', '--network', 'host', '--health-interval', '1s',
        '-e', `REDIS_URL=${redis.url}`, '-e', `AUTH_JWT_SECRET=${TEST_JWT_SECRET}`, '-e', 'HOST=127.0.0.1', '-e', `PORT=${port}`, '-e', `METRICS_PORT=${metricsPort}`, '-e', 'REDIS_COMMAND_TIMEOUT_MS=5000', IMAGE])
    ).trim();
    const inspect = async (format: string) => (await engine.docker(['inspect', '-f', format, id])).trim();
    try {
      await waitUntil('the container healthy by its HEALTHCHECK', async () => (await inspect('{{.State.Health.Status}}')) === 'healthy', 60_000);
      const listening = (await engine.docker(['logs', id])).split('\n').find((l) => l.includes('"msg":"listening"'));
      expect(JSON.parse(listening!)).toMatchObject({ uws: '@btc-vision/uwebsockets.js@20.57.0', node: expect.stringMatching(/^v24\./) as unknown });
      const url = `http://127.0.0.1:${port}`;
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      expect(await (await fetch(`${url}/readyz`)).json()).toMatchObject({ status: 'ready' });

      const uid = /^Uid:\s+(\d+)\s+(\d+)/m.exec(readFileSync(`/proc/${await inspect('{{.State.Pid}}')}/status`, 'utf8'));
      expect([uid?.[1], uid?.[2]]).toEqual(['1000', '1000']);
      expect(await inspect('{{.Config.User}}')).toBe('node');

      const caller = device(url);
      const callee = device(url);
      const ws = await connect(url, callee.token);
      sockets.push(ws);
      const { callId } = await ringingCall(url, caller, callee);
      expect((await ws.next('event')).event).toMatchObject({ type: 'call.invited', callId });
      expect((await answer(callee, callId)).status).toBe(200);
      expect((await end(caller, callId, 'localHangup')).status).toBe(200);

      await engine.docker(['stop', '--time', '20', id], { timeoutMs: 60_000 });
      expect(await inspect('{{.State.ExitCode}}')).toBe('0');
      expect(await ws.closed).toEqual({ code: 1001, reason: 'server shutting down; reconnect with your cursor' });
      expect(await engine.docker(['logs', id])).toMatch(/"msg":"shutting down"/);
    } finally {
      await engine.docker(['rm', '-f', id]);
    }
  }, 180_000);

  it('docker-compose.yml comes up with Debian\'s docker-compose, serves a call through its proxy, and goes down with -v', async () => {
    await makeStandIns(engine);
    const project = `calling-test-${randomUUID().slice(0, 8)}`;
    const proxyPort = await freePort();
    const env = {
      AUTH_JWT_SECRET: TEST_JWT_SECRET,
      PROXY_PORT: String(proxyPort),
      // As docs/operations.md says for a host whose Docker daemon cannot raise the limit.
      OPEN_FILES: String(Math.min(262_144, engine.openFilesLimit())),
      // As for every server the tests start (test/support/server.ts), not the production 500 ms.
      REDIS_COMMAND_TIMEOUT_MS: '5000',
    };
    const compose = (args: string[]) => engine.compose(['-p', project, '-f', 'docker-compose.yml', ...args], { cwd: REPO_ROOT, env, timeoutMs: 180_000 });
    try {
      await compose(['up', '-d', '--no-build']);
      const url = `http://127.0.0.1:${proxyPort}`;
      await waitUntil('the stack ready through its proxy', () => fetch(`${url}/readyz`).then((r) => r.status === 200, () => false), 60_000);
      const caller = device(url);
      const callee = device(url);
      const ws = await connect(url, callee.token);
      sockets.push(ws);
      const { callId } = await ringingCall(url, caller, callee);
      // Relayed by the worker container, delivered by whichever replica holds the socket.
      expect((await ws.next('event', 10_000)).event).toMatchObject({ type: 'call.invited', callId });
      expect((await answer(callee, callId)).status).toBe(200);
      expect((await end(caller, callId, 'localHangup')).status).toBe(200);
      const running = (await compose(['ps', '--services', '--filter', 'status=running'])).split('\n').filter(Boolean).sort();
      expect(running).toEqual(['api-1', 'api-2', 'proxy', 'redis', 'worker']);
    } finally {
      await compose(['down', '-v', '--timeout', '20']);
    }
    const label = `label=com.docker.compose.project=${project}`;
    expect(await engine.docker(['ps', '-aq', '--filter', label])).toBe('');
    expect(await engine.docker(['volume', 'ls', '-q', '--filter', label])).toBe('');
  }, 600_000);
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
});
