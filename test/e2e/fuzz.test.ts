import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { startServer, type TestServer } from '../support/server.js';
import { connectTestRedis, keyspace } from '../support/fixtures.js';
import { api } from '../support/http.js';
import { ALLOWED_CLOSE_CODES, FUZZ_SERVER_ENV, checkRequest, frameArb, FUZZ_SHARDS, groupRoute, requestArb, seedCalls, sendFrames, trimOutboxes, type Distribution } from '../support/fuzz.js';
import { sleep } from '../support/wait.js';

/**
 * Fuzzing with fast-check (test/support/fuzz.ts has the generators and properties). In CI a few
 * thousand cases; `npm run fuzz` runs FUZZ_RUNS (100,000) HTTP cases and prints the status
 * distribution. An api+gateway process without a worker, on its own Redis (DEBUG DIGEST on).
 */

const HTTP_RUNS = Number(process.env.FUZZ_RUNS ?? 2000);
const WS_RUNS = Math.max(100, Math.round(HTTP_RUNS / 10));

let redis: RedisServer;
let server: TestServer;
let client: Redis;

beforeAll(async () => {
  redis = await startRedis({ extraArgs: ['--enable-debug-command', 'local'] });
  server = await startServer({ REDIS_URL: redis.url, ROLES: 'api,gateway', CALL_SHARDS: String(FUZZ_SHARDS), ...FUZZ_SERVER_ENV });
  client = connectTestRedis(redis.url);
  await seedCalls(server.url);
  // The fuzz user's first socket makes its event log's epoch (docs/signaling.md): made here, so
  // the WebSocket cases measure their frames against a keyspace their connection does not change.
  await sendFrames(server.url, [{ data: '{"type":"ping"}', binary: false }]);
});

afterAll(async () => {
  client?.disconnect();
  await server?.stop();
  await redis?.stop();
});

/** The keyspace once two reads 50 ms apart agree (commands of a closed socket have finished). */
async function settledKeyspace(redis: Redis): Promise<Record<string, string>> {
  let last = await keyspace(redis);
  for (;;) {
    await sleep(50);
    const now = await keyspace(redis);
    if (JSON.stringify(now) === JSON.stringify(last)) return now;
    last = now;
  }
}

describe('fuzz', () => {
  it(`HTTP: ${HTTP_RUNS} requests from every route with arbitrary and near-valid parts: no 5xx, problem+json errors, refusals change nothing`, async () => {
    const statuses: Distribution = new Map();
    /** Group call requests that succeeded, by route (docs/group-calls.md). */
    const groupDone = new Map<string, number>();
    const started = Date.now();
    const digest: { value?: string } = {};
    await fc.assert(
      fc.asyncProperty(requestArb, async (req) => {
        const status = await checkRequest(server.url, client, req, digest);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        const group = groupRoute(req);
        if (group && status < 300) groupDone.set(group, (groupDone.get(group) ?? 0) + 1);
      }),
      { numRuns: HTTP_RUNS, seed: process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined },
    );
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    const table = [...statuses].sort(([a], [b]) => a - b).map(([s, n]) => `${s}: ${n}`).join(', ');
    console.log(`fuzz HTTP: ${HTTP_RUNS} cases in ${seconds} s; statuses ${table}; group calls done ${[...groupDone].map(([r, n]) => `${r}: ${n}`).join(', ')}`);
    // Group calls were among them, past validation: created, and rung into or receipted.
    expect(groupDone.get('create') ?? 0).toBeGreaterThan(0);
    expect((groupDone.get('invite') ?? 0) + (groupDone.get('ringing') ?? 0)).toBeGreaterThan(0);
    // The generators reach past validation: some requests succeed, most are refused for many reasons.
    expect([...statuses.keys()].filter((s) => s < 300).length).toBeGreaterThanOrEqual(2);
    expect([...statuses.keys()].filter((s) => s >= 400).length).toBeGreaterThanOrEqual(5);
    expect(server.child.exitCode).toBeNull();
  }, Math.max(120_000, HTTP_RUNS * 40));

  it(`WebSocket: ${WS_RUNS} sockets sending arbitrary frames: closed only with documented codes, the server stays up`, async () => {
    const codes = new Map<string, number>();
    const statuses: Distribution = new Map();
    await fc.assert(
      fc.asyncProperty(fc.array(frameArb, { minLength: 1, maxLength: 8 }), async (frames) => {
        // An earlier socket's command may still be landing (one the server closed completes, its
        // reply lost): wait until the keyspace is still, then clear the outboxes, so these frames
        // are measured against a state nothing else changes.
        await settledKeyspace(client);
        await trimOutboxes(client);
        const before = await keyspace(client);
        const { closeCode, statuses: replies } = await sendFrames(server.url, frames);
        const key = closeCode === undefined ? 'open' : String(closeCode);
        codes.set(key, (codes.get(key) ?? 0) + 1);
        for (const status of replies) statuses.set(status, (statuses.get(status) ?? 0) + 1);
        const where = JSON.stringify(frames).slice(0, 300);
        if (closeCode !== undefined && !ALLOWED_CLOSE_CODES.has(closeCode)) throw new Error(`closed with ${closeCode} after ${where}`);
        if (replies.some((s) => s >= 500)) throw new Error(`a 5xx reply after ${where}`);
        // Refused commands change nothing; a 409 is a decided outcome, recorded for replays (as over
        // HTTP). Checked when every frame was answered: on a socket the server closed, a command
        // may still be running (it completes; its reply is lost, and a retry replays it).
        if (closeCode === undefined && replies.every((s) => s >= 400 && s !== 409)) {
          await trimOutboxes(client);
          const after = await keyspace(client);
          const changed = [...new Set([...Object.keys(before), ...Object.keys(after)])].filter((k) => before[k] !== after[k]);
          if (changed.length > 0) throw new Error(`refused frames changed Redis (${changed.join(', ')}): ${where}`);
        }
      }),
      { numRuns: WS_RUNS },
    );
    console.log(`fuzz WebSocket: ${WS_RUNS} sockets; outcomes ${[...codes].map(([c, n]) => `${c}: ${n}`).join(', ')}; command replies ${[...statuses].sort(([a], [b]) => a - b).map(([s, n]) => `${s}: ${n}`).join(', ')}`);
    // The command frames reached past validation: some ran, more were refused for several reasons.
    expect([...statuses.keys()].filter((s) => s < 300).length).toBeGreaterThanOrEqual(1);
    expect([...statuses.keys()].filter((s) => s >= 400).length).toBeGreaterThanOrEqual(3);
    // Frames over the limit and text that is not UTF-8 were among them, and closed the socket.
    expect(codes.get('1009') ?? 0).toBeGreaterThan(0);
    expect(codes.get('1006') ?? 0).toBeGreaterThan(0);
    expect((await api(server.url).get('/readyz')).status).toBe(200);
    expect(server.child.exitCode).toBeNull();
  }, Math.max(120_000, WS_RUNS * 400));
});
