import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { startServer, type TestServer } from '../support/server.js';
import { device, expectProblem, ringingCall, uid } from '../support/fixtures.js';
import { api } from '../support/http.js';
import { configSchema } from '../../src/config/config.js';
import { waitUntil } from '../e2e/helpers.js';

/**
 * A stalled Redis (SIGSTOP: the connection stays up, nothing answers) must not hang requests:
 * they answer 503 `unavailable` with retry-after within REDIS_COMMAND_TIMEOUT_MS (500 ms by
 * default), /readyz answers within a second and says not ready, and everything recovers by
 * itself once Redis answers again (docs/operations.md "Operations").
 */

let redis: RedisServer;
let server: TestServer;

/** The production default, which this test runs with (the harness raises it for loaded machines). */
const DEFAULT_TIMEOUT_MS = configSchema.shape.REDIS_COMMAND_TIMEOUT_MS.parse(undefined);

beforeAll(async () => {
  redis = await startRedis();
  server = await startServer({ REDIS_URL: redis.url, REDIS_COMMAND_TIMEOUT_MS: String(DEFAULT_TIMEOUT_MS) });
});
afterAll(async () => {
  try {
    process.kill(redis.pid, 'SIGCONT');
  } catch {
    /* already gone */
  }
  await server?.stop();
  await redis?.stop();
});

describe('a stalled Redis', () => {
  it('the default REDIS_COMMAND_TIMEOUT_MS is at most 500 ms', () => {
    expect(DEFAULT_TIMEOUT_MS).toBeLessThanOrEqual(500);
  });

  it('answers 503 with retry-after in bounded time, /readyz says not ready within a second, and recovers on its own', async () => {
    const pair = await ringingCall(server.url);
    process.kill(redis.pid, 'SIGSTOP');
    try {
      // Each must answer before this (ioredis alone would wait for its reconnect logic).
      const within = <T>(p: Promise<T>) =>
        Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no answer within 2 s')), 2_000))]);
      const [create, get, ready] = await Promise.all([
        within(pair.caller.api.post('/v1/calls', { callId: randomUUID(), calleeUserId: pair.callee.userId, operationId: uid('op') })),
        within(pair.caller.api.get(`/v1/calls/${pair.callId}`)),
        within(api(server.url).get('/readyz')),
      ]);
      for (const res of [create, get]) {
        expectProblem(res, 'unavailable', /unreachable/);
        expect(res.headers.get('retry-after')).toBe('1');
      }
      expect(ready.status).toBe(503);
      expect(ready.json).toMatchObject({ status: 'not ready', redis: false });
    } finally {
      process.kill(redis.pid, 'SIGCONT');
    }
    // Recovery: ready again, and calls work again through the same connections.
    await waitUntil('ready again', async () => (await api(server.url).get('/readyz')).status === 200, 10_000);
    const again = await ringingCall(server.url, device(server.url), pair.callee);
    expect(again.created.json.state).toBe('ringing');
  });
});
