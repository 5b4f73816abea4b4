import type { Route } from '../router.js';

export interface Readiness {
  /** False once shutdown began. */
  accepting: () => boolean;
  /** Resolves when Redis answers PING and the scripts are loaded. */
  redisReady: () => Promise<boolean>;
}

/** GET /healthz: the process is alive. GET /readyz: it should receive traffic. */
export function healthRoutes(r: Readiness): Route[] {
  return [
    { method: 'get', pattern: '/healthz', handler: () => ({ status: 200, body: '{"status":"ok"}' }) },
    {
      method: 'get',
      pattern: '/readyz',
      handler: async () => {
        const redis = await r.redisReady().catch(() => false);
        const ok = redis && r.accepting();
        return {
          status: ok ? 200 : 503,
          body: JSON.stringify({ status: ok ? 'ready' : 'not ready', redis, accepting: r.accepting() }),
        };
      },
    },
  ];
}
