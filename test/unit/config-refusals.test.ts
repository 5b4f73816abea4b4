import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, startRefusal } from '../../src/config/config.js';

/**
 * The configuration's refusals (docs/configuration.md): a bad value names its variable, and what
 * the process refuses to start with beyond the values' own checks (src/main.ts stops on either
 * with exit code 2 and these lines; test/e2e/startup.test.ts checks that once per way).
 */

const SECRET = 'x'.repeat(40);
const refusalOf = (env: Record<string, string>, production = false, redisServer = true) => startRefusal(loadConfig(env), production, () => redisServer);

describe('configuration refusals', () => {
  it('a bad value names the variable and why, every bad one at once', () => {
    expect(() => loadConfig({ PORT: 'eighty', RING_TIMEOUT_MS: '90000' })).toThrow(ConfigError);
    try {
      loadConfig({ PORT: 'eighty', RING_TIMEOUT_MS: '90000' });
    } catch (err) {
      expect((err as Error).message).toMatch(/^invalid configuration:\n/);
      expect((err as Error).message).toMatch(/ {2}PORT: /);
      expect((err as Error).message).toMatch(/ {2}RING_TIMEOUT_MS: Too big/);
    }
  });

  it('without a verification key it refuses, naming AUTH_JWT_SECRET; any one of the three is enough', () => {
    expect(refusalOf({ REDIS_URL: 'redis://127.0.0.1:1' })).toMatch(/^AUTH_JWT_SECRET: set one of AUTH_JWT_SECRET, AUTH_JWT_PUBLIC_KEY or AUTH_JWKS_URL/);
    // In production too: --dev's generated secret is never made there (src/main.ts).
    expect(refusalOf({ REDIS_URL: 'redis://127.0.0.1:1' }, true)).toMatch(/^AUTH_JWT_SECRET: /);
    expect(refusalOf({ REDIS_URL: 'redis://127.0.0.1:1', AUTH_JWT_SECRET: SECRET })).toBeUndefined();
    expect(refusalOf({ REDIS_URL: 'redis://127.0.0.1:1', AUTH_JWKS_URL: 'https://issuer.example.com/jwks.json' })).toBeUndefined();
  });

  it('with no Redis configured: an embedded one in development when redis-server runs, a refusal in production or without it', () => {
    expect(refusalOf({ AUTH_JWT_SECRET: SECRET })).toBeUndefined();
    expect(refusalOf({ AUTH_JWT_SECRET: SECRET }, true)).toBe('REDIS_URL: with NODE_ENV=production set REDIS_URL or REDIS_CLUSTER_NODES (the embedded Redis is for development only)');
    expect(refusalOf({ AUTH_JWT_SECRET: SECRET }, false, false)).toMatch(/^REDIS_URL: neither REDIS_URL nor REDIS_CLUSTER_NODES is set, and no redis-server on the PATH/);
    expect(refusalOf({ AUTH_JWT_SECRET: SECRET, REDIS_CLUSTER_NODES: '127.0.0.1:7000' }, true)).toBeUndefined();
  });
});
