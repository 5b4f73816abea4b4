import type { ApiDeps } from '../deps.js';
import type { Route } from '../router.js';
import { callRoute } from './callRoute.js';
import { callReply } from '../../commands/callReply.js';

/** GET /v1/calls/{id}: the current snapshot, ended calls included; non-members get 404. */
export function getCallRoute(deps: ApiDeps): Route {
  return callRoute(deps, 'get', '/v1/calls/:id', async (_ctx, me, callId) => callReply(await deps.calls.read(callId, me.userId), me.userId));
}
