import type { Route } from '../../router.js';
import { errors } from '../../../commands/errors.js';
import { pageQuery, parseParam } from '../../request.js';
import { opaqueId } from '../../../commands/schemas.js';
import type { ApiDeps } from '../../deps.js';
import { serverRoute, type ServerAuth } from './serverRoute.js';

/**
 * The server API's webhook routes (docs/webhooks.md): the endpoints and which are disabled, enabling
 * one again, and the dead letters, read and replayed.
 */
export function serverWebhookRoutes(auth: ServerAuth, webhooks: ApiDeps['webhooks'], replay: (letterId: string) => Promise<boolean>): Route[] {
  const endpointId = opaqueId;
  return [
    serverRoute(auth, 'get', '/v1/server/webhooks/endpoints', async () => {
      const disabled = await webhooks.states.all();
      const endpoints = webhooks.endpoints.map((e) => ({ id: e.id, url: e.url, events: [...e.events], disabled: disabled.get(e.id) ?? null }));
      return { status: 200, body: JSON.stringify({ endpoints }) };
    }),
    serverRoute(auth, 'post', '/v1/server/webhooks/endpoints/:id/enable', async (ctx) => {
      const id = parseParam('id', ctx.params[0]!, endpointId);
      if (!webhooks.endpoints.some((e) => e.id === id)) throw errors.notFound('no webhook endpoint with this id');
      const wasDisabled = await webhooks.states.enable(id);
      return { status: 200, body: JSON.stringify({ id, wasDisabled }) };
    }),
    serverRoute(auth, 'get', '/v1/server/webhooks/dead-letters', async (ctx) => {
      const { cursor, limit } = pageQuery(ctx);
      const page = await webhooks.deadLetters.list({ cursor, limit });
      return { status: 200, body: `{"deadLetters":[${page.records.join(',')}],"nextCursor":${JSON.stringify(page.nextCursor)}}` };
    }),
    // Queues the delivery again (a fresh schedule, the same webhook-id) and removes the dead letter.
    serverRoute(auth, 'post', '/v1/server/webhooks/dead-letters/:id/replay', async (ctx) => {
      const id = parseParam('id', ctx.params[0]!, opaqueId);
      if (!(await replay(id))) throw errors.notFound('no dead letter with this id (replayed already, or never there)');
      return { status: 202, body: JSON.stringify({ id, replayed: true }) };
    }),
  ];
}
