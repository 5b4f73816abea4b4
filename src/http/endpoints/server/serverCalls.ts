import type { Route } from '../../router.js';
import { errors } from '../../../commands/errors.js';
import { parseJsonBody, parseParam } from '../../request.js';
import { opaqueId, principalId, serverEndCallBody } from '../../../commands/schemas.js';
import type { CallStore } from '../../../calls/store.js';
import { callRecordBody } from '../../../calls/recordBody.js';
import type { CallHistory } from '../../../history/callHistory.js';
import type { UserAdmin } from '../../../users/userAdmin.js';
import { historyPage } from '../callHistory.js';
import { serverRoute, type ServerAuth } from './serverRoute.js';

/** The server API's call routes (docs/server-api.md). */
export function serverCallRoutes(auth: ServerAuth, deps: { calls: CallStore; history: CallHistory; users: UserAdmin }): Route[] {
  return [
    // End any call: by the system, both sides told `reason`. Ending an ended call changes nothing
    // and returns it (`ended: false`), so a retry is safe.
    serverRoute(auth, 'post', '/v1/server/calls/:id/end', async (ctx) => {
      const callId = parseParam('id', ctx.params[0]!, opaqueId);
      const body = parseJsonBody(ctx, serverEndCallBody, true);
      const r = await deps.calls.endByServer(callId, body.reason);
      if (!r) throw errors.notFound('no call with this callId');
      return { status: 200, body: JSON.stringify({ ...r, call: callRecordBody(r.call) }) };
    }),
    // Remove a member from a group call (docs/server-api.md "Remove a participant"); a retry is safe.
    serverRoute(auth, 'del', '/v1/server/calls/:id/participants/:userId', async (ctx) => {
      const r = await deps.calls.removeMember(parseParam('id', ctx.params[0]!, opaqueId), parseParam('userId', ctx.params[1]!, principalId));
      if ('failure' in r) {
        if (r.failure === 'not_group') throw errors.invalidRequest('this is a one-to-one call: end it instead');
        throw errors.notFound(r.failure === 'not_found' ? 'no call with this callId' : 'this user is not a member of the call');
      }
      return { status: 200, body: JSON.stringify({ ...r, call: callRecordBody(r.call) }) };
    }),
    serverRoute(auth, 'get', '/v1/server/calls/:id', async (ctx) => {
      const call = await deps.calls.peek(parseParam('id', ctx.params[0]!, opaqueId));
      if (!call) throw errors.notFound('no call with this callId (or it is past CALL_RETENTION_MS)');
      return { status: 200, body: JSON.stringify(callRecordBody(call)) };
    }),
    serverRoute(auth, 'get', '/v1/server/users/:userId/calls/active', async (ctx) => {
      const calls = await deps.users.activeCalls(parseParam('userId', ctx.params[0]!, principalId));
      return { status: 200, body: JSON.stringify({ calls: calls.map(callRecordBody) }) };
    }),
    serverRoute(auth, 'get', '/v1/server/users/:userId/calls', async (ctx) => historyPage(deps.history, parseParam('userId', ctx.params[0]!, principalId), ctx)),
  ];
}
