import type { Route } from '../router.js';

export interface Readiness {
  /** False once shutdown began. */
  accepting: () => boolean;
  /** Resolves when Redis answers PING and the scripts are loaded. */
  redisReady: () => Promise<boolean>;
  /**
   * With `sfu` media: whether every SFU instance answers. Reported, but it does not make the
   * process unready: signaling goes on without the SFU (docs/operations.md "SFU media").
   */
  sfuReady?: () => Promise<boolean>;
}

/** GET /healthz: the process is alive. GET /readyz: it should receive traffic. */
export function healthRoutes(r: Readiness): Route[] {
  return [
    { method: 'get', pattern: '/healthz', handler: () => ({ status: 200, body: '{"status":"ok"}' }) },
    {
      method: 'get',
      pattern: '/readyz',
      handler: async () => {
        const [redis, sfu] = await Promise.all([r.redisReady().catch(() => false), r.sfuReady?.().catch(() => false)]);
        const ok = redis && r.accepting();
        return {
          status: ok ? 200 : 503,
          body: JSON.stringify({ status: ok ? 'ready' : 'not ready', redis, accepting: r.accepting(), ...(sfu === undefined ? {} : { sfu }) }),
        };
      },
    },
  ];
}
