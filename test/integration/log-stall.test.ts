import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { startServer, type TestServer } from '../support/server.js';
import { tokenFor } from '../support/tokens.js';

/**
 * A log reader that stops reading (a stuck log shipper, a full pipe to a container runtime) must
 * not stop the server: it keeps serving, its log buffer stays bounded (lines past it are dropped
 * and counted), and SIGTERM still ends it within its shutdown bound (src/util/logger.ts). The
 * server's stdout is a real pipe here that the test stops reading after `listening`.
 */

let redis: RedisServer;
let server: TestServer;
const SHUTDOWN_TIMEOUT_MS = 3000;

beforeAll(async () => {
  redis = await startRedis();
  // Debug: every socket opened and closed writes two lines.
  server = await startServer({ REDIS_URL: redis.url, LOG_LEVEL: 'debug', LOG_BUFFER_MAX_BYTES: '65536', SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS) });
});
afterAll(async () => {
  await server?.stop();
  await redis?.stop();
});

/** Opens a signaling socket and closes it once the server said `synced`: two debug lines. */
function openAndClose(url: string, token: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/signaling?access_token=${encodeURIComponent(token)}`);
    ws.on('message', (data) => {
      if (String(data).includes('"synced"')) ws.close();
    });
    ws.on('close', () => resolve());
    ws.on('error', reject);
  });
}

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${server.metricsUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : NaN;
}

describe('a log reader that stops reading', () => {
  it('does not stop the server serving, and SIGTERM still ends it within its shutdown bound', async () => {
    server.child.stdout!.pause();
    server.child.stdout!.removeAllListeners('data');
    // Far more lines than the pipe and the server's log buffer hold together.
    for (let round = 0; round < 30; round++) {
      await Promise.all(Array.from({ length: 100 }, (_, i) => openAndClose(server.url, tokenFor({ userId: `stall-${i}`, installationId: `stall-${i}-phone` }))));
    }
    const health = await fetch(`${server.url}/healthz`);
    expect(health.status).toBe(200);
    expect(await metric('calling_log_lines_dropped_total')).toBeGreaterThan(0);

    const exited = new Promise<number>((resolve) => server.child.once('exit', () => resolve(Date.now())));
    const sent = Date.now();
    server.child.kill('SIGTERM');
    const at = await Promise.race([exited, new Promise<number>((resolve) => setTimeout(() => resolve(Infinity), SHUTDOWN_TIMEOUT_MS + 10_000))]);
    // The bound, then at most a second for the last lines (src/util/logger.ts), and room for a loaded machine.
    expect(at - sent).toBeLessThan(SHUTDOWN_TIMEOUT_MS + 1000 + 2000);
  }, 120_000);
});
