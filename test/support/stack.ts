import type { Redis } from 'ioredis';
import { startRedis } from './redis-server.js';
import { startServer, type TestServer } from './server.js';
import { connectTestRedis } from './fixtures.js';

/**
 * One test file's stack: its own redis-server, one or more real server processes on it, and a
 * direct Redis connection for looking at (never faking) the stored state.
 */
export interface Stack {
  redisUrl: string;
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

export async function startStack(env: Record<string, string> = {}): Promise<Stack> {
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
