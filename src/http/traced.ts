import { ApiError } from '../commands/errors.js';
import { inSpan, SpanKind } from '../observability/tracing.js';
import type { Route } from './router.js';

/** The route with a server span around its handler (docs/operations.md "Tracing"); a 4xx is not a failure. */
export function traced(route: Route): Route {
  const name = `${route.method === 'del' ? 'DELETE' : route.method.toUpperCase()} ${route.pattern}`;
  return {
    ...route,
    handler: (ctx) =>
      inSpan(
        name,
        {
          kind: SpanKind.SERVER,
          parent: ctx.traceparent || undefined,
          attributes: { 'http.route': route.pattern, 'http.request.method': ctx.method.toUpperCase() },
          errorIf: (err) => !(err instanceof ApiError) || err.status >= 500,
        },
        async (span) => {
          try {
            const reply = await route.handler(ctx);
            span?.setAttribute('http.response.status_code', reply.status);
            return reply;
          } catch (err) {
            if (err instanceof ApiError) span?.setAttribute('http.response.status_code', err.status);
            throw err;
          }
        },
      ),
  };
}

