import { ConfigError, loadConfig, startRefusal, type Config } from './config/config.js';
import { startServer } from './server.js';
import { startEmbeddedRedis, type EmbeddedRedis } from './redis/embedded.js';
import { devSecret, mintToken } from './auth/devTokens.js';
import { devBanner } from './demo/devBanner.js';
import { commandRuns } from './util/commandRuns.js';
import { createLogger } from './util/logger.js';
import { flushTracing, startTracing } from './observability/tracing.js';
import type { RedisTarget } from './redis/connection.js';

/**
 * Entry point. `--dev` generates a local signing secret when none is configured and prints
 * ready-to-use tokens. Without REDIS_URL or REDIS_CLUSTER_NODES, a Redis child process is started when `redis-server`
 * is on the PATH (data in EMBEDDED_REDIS_DIR, append-only) and stopped on exit.
 */
async function main(): Promise<void> {
  const env = { ...process.env };
  // In production nothing is defaulted silently: no generated secret, no embedded Redis.
  const production = env.NODE_ENV === 'production';
  const dev = process.argv.includes('--dev') && !production;
  if (dev && !env.AUTH_JWT_SECRET && !env.AUTH_JWT_PUBLIC_KEY && !env.AUTH_JWKS_URL) {
    env.AUTH_JWT_SECRET = devSecret('.data/dev-secret');
  }
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  // In dev mode lines go out one by one, in order with the printed tokens (src/util/logger.ts).
  const logger = createLogger(config.LOG_LEVEL, dev ? process.stdout : undefined, config.LOG_BUFFER_MAX_BYTES);
  const refused = startRefusal(config, production, () => commandRuns('redis-server'));
  if (refused) {
    process.stderr.write(`invalid configuration:\n  ${refused}\n`);
    process.exit(2);
  }

  let embedded: EmbeddedRedis | undefined;
  let redisTarget: RedisTarget | undefined = config.REDIS_CLUSTER_NODES ? { cluster: config.REDIS_CLUSTER_NODES } : config.REDIS_URL;
  if (!redisTarget) {
    embedded = await startEmbeddedRedis(config.EMBEDDED_REDIS_DIR);
    redisTarget = embedded.url;
    logger.info({ redis: redisTarget, dir: config.EMBEDDED_REDIS_DIR, redisPid: embedded.pid }, 'started embedded redis-server');
  }

  if (config.TRACING === 'otlp') await startTracing(`calling-backend-${config.ROLES.join('-')}`);
  // The dev token endpoint of the softphone exists only in dev mode (docs/development.md "Browser softphone").
  const server = await startServer(config, redisTarget, logger, [], { devTokenSecret: dev ? config.AUTH_JWT_SECRET : undefined });

  if (dev && config.AUTH_JWT_SECRET) {
    const base = `http://127.0.0.1:${server.port}`;
    const alice = mintToken(config.AUTH_JWT_SECRET, { sub: 'alice', iid: 'alice-phone', name: 'Alice' });
    const bob = mintToken(config.AUTH_JWT_SECRET, { sub: 'bob', iid: 'bob-phone', name: 'Bob' });
    process.stdout.write(devBanner({ baseUrl: base, alice, bob, curl: commandRuns('curl'), demo: config.DEMO }));
  }

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const timer = setTimeout(() => process.exit(1), config.SHUTDOWN_TIMEOUT_MS).unref();
    await server.close();
    await flushTracing();
    await embedded?.stop();
    clearTimeout(timer);
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`fatal: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
