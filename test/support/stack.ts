import { Cluster, type Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { redisCommand, startRedis, startRedisCluster, type RedisCluster } from './redis-server.js';
import { startServer, type TestServer } from './server.js';
import { connectTestRedis } from './fixtures.js';

/**
 * One test file's stack: its own redis-server (on a cluster, the worker's, emptied: takeCluster),
 * one or more real server processes on it, and a direct Redis connection for looking at (never
 * faking) the stored state.
 */
export interface Stack {
  /** The single Redis's URL ('' on a cluster: use redisEnv). */
  redisUrl: string;
  /** What a server process needs to reach this stack's Redis (REDIS_URL or REDIS_CLUSTER_NODES). */
  redisEnv: Record<string, string>;
  /** Direct connection to the test Redis. */
  redis: Redis;
  /** The first server's base URL. */
  url: string;
  servers: TestServer[];
  /** Starts one more server on the same Redis. */
  addServer(env?: Record<string, string>): Promise<TestServer>;
  /** Stops the servers, then Redis. */
  stop(): Promise<void>;
  /** Stops only the redis-server (the servers keep running). */
  stopRedis(): Promise<void>;
}

/**
 * Whether this test run targets a Redis Cluster (3 primaries + 3 replicas) instead of a single
 * Redis: set by the `cluster` test project (vitest.config.ts) for the suites that run on both.
 */
export const ON_CLUSTER = process.env.TEST_REDIS_CLUSTER === '1';

/**
 * Starts something a whole test file (or the describe it is called in) uses, a stack or a push
 * stack, before its tests and stops it after them; `started` gets it, to keep what the tests need.
 */
export function forFile<T extends { stop(): Promise<void> }>(start: () => Promise<T>, started: (it: T) => unknown): void {
  let it: T | undefined;
  beforeAll(async () => {
    it = await start();
    await started(it);
  });
  afterAll(async () => {
    await it?.stop();
  });
}

/** The test file's stack (forFile). */
export function stackForFile(env: Record<string, string>, started: (stack: Stack) => unknown): void {
  forFile(() => startStack(env), started);
}

export async function startStack(env: Record<string, string> = {}): Promise<Stack> {
  if (ON_CLUSTER) return startClusterStack(env);
  const redisServer = await startRedis();
  const servers: TestServer[] = [];
  const redis = connectTestRedis(redisServer.url);
  let redisStopped = false;
  const addServer = async (e: Record<string, string> = {}) => {
    const s = await startServer({ REDIS_URL: redisServer.url, ...e });
    servers.push(s);
    return s;
  };
  const first = await addServer(env);
  return {
    redisUrl: redisServer.url,
    redisEnv: { REDIS_URL: redisServer.url },
    redis,
    url: first.url,
    servers,
    addServer,
    async stopRedis() {
      if (redisStopped) return;
      redisStopped = true;
      redis.disconnect();
      await redisServer.stop();
    },
    async stop() {
      await Promise.all(servers.map((s) => s.stop()));
      if (!redisStopped) {
        redisStopped = true;
        redis.disconnect();
        await redisServer.stop();
      }
    },
  };
}

/**
 * The 3+3 Redis Cluster a worker's cluster-project files take one after another (a worker runs its
 * files in one process: vitest.config.ts `isolate: false`). One takes about 3 s to start and 37
 * files use one; each stack gets it emptied (FLUSHALL on every primary, the previous file's servers
 * stopped). A stack started while another holds it gets a cluster of its own; one whose Redis a
 * test stops ends it, as does a node gone, and the next stack starts another. Suites that kill
 * nodes (test/cluster/failover) start their own with startRedisCluster.
 */
let workerCluster: { cluster: RedisCluster; held: boolean } | undefined;

async function takeCluster(): Promise<{ cluster: RedisCluster; release(): Promise<void>; discard(): Promise<void> }> {
  const lend = (shared: { cluster: RedisCluster; held: boolean }) => ({
    cluster: shared.cluster,
    release: async () => {
      shared.held = false;
    },
    discard: async () => {
      if (workerCluster === shared) workerCluster = undefined;
      await shared.cluster.stop();
    },
  });
  if (workerCluster && !workerCluster.held) {
    const shared = workerCluster;
    shared.held = true;
    try {
      await Promise.all(shared.cluster.nodes.map((n) => redisCommand(n.port, ['FLUSHALL'])));
      return lend(shared);
    } catch {
      // A node is gone (a test killed one itself): a new cluster, below.
      workerCluster = undefined;
      await shared.cluster.stop();
    }
  }
  if (workerCluster?.held) {
    const cluster = await startRedisCluster(3, 1);
    return { cluster, release: () => cluster.stop(), discard: () => cluster.stop() };
  }
  workerCluster = { cluster: await startRedisCluster(3, 1), held: true };
  return lend(workerCluster);
}

/** The same stack on a 3+3 Redis Cluster: the servers get REDIS_CLUSTER_NODES. */
async function startClusterStack(env: Record<string, string>): Promise<Stack> {
  const { cluster, release, discard } = await takeCluster();
  const servers: TestServer[] = [];
  const redis = new Cluster(cluster.nodes, { scaleReads: 'master', redisOptions: { maxRetriesPerRequest: 1 } });
  redis.on('error', () => {});
  let redisStopped = false;
  const addServer = async (e: Record<string, string> = {}) => {
    const s = await startServer({ REDIS_CLUSTER_NODES: cluster.seedList, ...e });
    servers.push(s);
    return s;
  };
  /** Lets go of the cluster once: `discard` ends it, `release` hands it to the worker's next stack. */
  const letGo = async (free: () => Promise<void>) => {
    if (redisStopped) return;
    redisStopped = true;
    redis.disconnect();
    await free();
  };
  const stopRedis = () => letGo(discard);
  try {
    const first = await addServer(env);
    return {
      redisUrl: '',
      redisEnv: { REDIS_CLUSTER_NODES: cluster.seedList },
      // Routed by key like a single Redis for every command the tests use to look at state.
      redis: redis as unknown as Redis,
      url: first.url,
      servers,
      addServer,
      stopRedis,
      async stop() {
        await Promise.all(servers.map((s) => s.stop()));
        await letGo(release);
      },
    };
  } catch (err) {
    await stopRedis();
    throw err;
  }
}
