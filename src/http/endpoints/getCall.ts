import type { ApiDeps } from '../deps.js';
import type { Route } from '../router.js';
import { callRoute } from './callRoute.js';
import { callReply } from '../../commands/callReply.js';

/**
 * GET /v1/calls/{id}: the current snapshot, ended calls included; non-members get 404. A call in
 * progress also shows its members' live signal state (`presence`, docs/signaling.md "Live
 * signals"), read after the call: what a device that (re)connects starts from.
 */
export function getCallRoute(deps: ApiDeps): Route {
  return callRoute(deps, 'get', '/v1/calls/:id', async (_ctx, me, callId) => {
    const reply = callReply(await deps.calls.read(callId, me.userId), me.userId);
    if (reply.status !== 200 || !reply.body) return reply;
    const snapshot = JSON.parse(reply.body) as { state: string };
    if (snapshot.state === 'ended') return reply;
    const presence = await deps.calls.presence(callId);
    // Absent while nobody has sent a state: the snapshot stays what every other route returns.
    return Object.keys(presence).length === 0 ? reply : { ...reply, body: JSON.stringify({ ...snapshot, presence }) };
  });
}
