import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { startServer } from '../support/server.js';
import { startRedis } from '../support/redis-server.js';
import { runMain, withQuickStart } from '../support/mainProcess.js';

/**
 * The process's start: the quick start (`--dev` with an embedded Redis and printed tokens), the
 * configuration refusals' exit code (the rules themselves: test/unit/config-refusals.test.ts), and
 * the refusal to run on uWebSockets.js's slow `ws` fallback.
 */

describe('start-up', () => {
  it('a bad configuration value stops the process with exit code 2 and names the variable', async () => {
    const { code, output } = await runMain({ PORT: 'eighty', RING_TIMEOUT_MS: '90000', AUTH_JWT_SECRET: 'x'.repeat(40), REDIS_URL: 'redis://127.0.0.1:1' }).exited;
    expect(code).toBe(2);
    expect(output).toMatch(/invalid configuration/);
    expect(output).toMatch(/PORT: /);
    expect(output).toMatch(/RING_TIMEOUT_MS: Too big/);
  });

  it('a start refusal beyond the values (NODE_ENV=production without Redis) stops it with exit code 2 too, and no embedded Redis starts', async () => {
    // Every refusal's rule is a unit test (test/unit/config-refusals.test.ts); this is main's use of them.
    const noRedis = await runMain({ NODE_ENV: 'production', AUTH_JWT_SECRET: 'x'.repeat(40) }).exited;
    expect(noRedis.code).toBe(2);
    expect(noRedis.output).toMatch(/REDIS_URL: with NODE_ENV=production set REDIS_URL or REDIS_CLUSTER_NODES/);
    expect(noRedis.output).not.toMatch(/embedded redis-server/);
  });

  it('refuses to run on the uWebSockets.js ws fallback unless allowed', async () => {
    // Neither build's binary loads: the newer one as on glibc < 2.38 (a preload makes it fail on any
    // machine), the other as on a Node.js it has no binary for (UWS_USE_FALLBACK, its own switch).
    const noBtc = fileURLToPath(new URL('../support/no-btc-uws.cjs', import.meta.url));
    const { code, output } = await runMain({ UWS_USE_FALLBACK: '1', NODE_OPTIONS: `--require ${noBtc}`, AUTH_JWT_SECRET: 'x'.repeat(40), REDIS_URL: 'redis://127.0.0.1:1' }).exited;
    expect(code).toBe(1);
    expect(output).toMatch(/no uWebSockets\.js native binary loads on Node\.js v/);
    // Both builds were tried, each with its reason.
    expect(output).toMatch(/@btc-vision\/uwebsockets\.js: /);
    expect(output).toMatch(/uWebSockets\.js: no native binary for this Node\.js \(fell back to its ws shim\)/);
    expect(output).toMatch(/ALLOW_UWS_FALLBACK=true/);
  });

  it('quick start: --dev without REDIS_URL starts an embedded redis-server, prints working tokens, and stops it on SIGTERM', () =>
    withQuickStart(async (run, out, dir) => {
      const port = Number(/"port":(\d+)/.exec(out)?.[1]);
      const redisPort = Number(/"redis":"redis:\/\/127\.0\.0\.1:(\d+)"/.exec(out)?.[1]);
      const alice = /ALICE=(\S+)/.exec(out)?.[1];
      expect(port).toBeGreaterThan(0);
      expect(redisPort).toBeGreaterThan(0);
      expect(redisPort).not.toBe(6379);
      const res = await fetch(`http://127.0.0.1:${port}/v1/calls`, {
        method: 'POST',
        headers: { authorization: `Bearer ${alice}`, 'content-type': 'application/json' },
        body: JSON.stringify({ callId: crypto.randomUUID(), calleeUserId: 'bob', operationId: crypto.randomUUID() }),
      });
      expect(res.status).toBe(201);
      expect(((await res.json()) as { caller: unknown }).caller).toEqual({ userId: 'alice', displayName: 'Alice', handle: 'app:alice' });
      // Append-only persistence in the data directory.
      expect(existsSync(join(dir, 'redis', 'appendonlydir'))).toBe(true);
      run.child.kill('SIGTERM');
      expect((await run.exited).code).toBe(0);
      // The embedded Redis is gone with it.
      const probe = await fetch(`http://127.0.0.1:${redisPort}`).then(
        () => 'open',
        (err: Error & { cause?: { code?: string } }) => err.cause?.code ?? 'error',
      );
      expect(probe).toBe('ECONNREFUSED');
    }));

  it("warns at start when Redis's hz would make ring sweeps and push retries start up to 100 ms late, and not with hz 100", async () => {
    for (const hz of [10, 100]) {
      const redis = await startRedis({ hz });
      const server = await startServer({ REDIS_URL: redis.url, ROLES: 'worker' });
      try {
        const warned = /Redis runs with hz 10: ring sweeps and push retries may start up to 100 ms late; run Redis with hz 100/.test(server.logs());
        expect(warned).toBe(hz === 10);
      } finally {
        await server.stop();
        await redis.stop();
      }
    }
  });

  it('refuses a webhook URL in http:// outside a private network, naming its host, and starts with one on it (docs/webhooks.md "Private networks")', async () => {
    const redis = await startRedis();
    try {
      const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
      const webhooks = (url: string) => JSON.stringify([{ id: 'billing', url, secret }]);
      const env = { AUTH_JWT_SECRET: 'x'.repeat(40), REDIS_URL: redis.url, PORT: '0', HOST: '127.0.0.1', METRICS_PORT: '0' };
      const refused = await runMain({ ...env, WEBHOOKS: webhooks('http://hooks.example.com:8080/calls') }).exited;
      expect(refused.code).toBe(2);
      expect(refused.output).toContain('WEBHOOKS: endpoint "billing" url: http:// to hooks.example.com:8080, which is not on a private network');
      const server = await startServer({ REDIS_URL: redis.url, WEBHOOKS: webhooks('http://127.0.0.1:9/calls') });
      await server.stop();
    } finally {
      await redis.stop();
    }
  });
});
