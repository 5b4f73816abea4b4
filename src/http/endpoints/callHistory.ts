import type { Route, RequestContext } from '../router.js';
import type { Reply } from '../../commands/command.js';
import { authenticate, pageQuery } from '../request.js';
import { errors } from '../../commands/errors.js';
import type { AuthGuard } from '../../auth/guard.js';
import type { CallHistory } from '../../history/callHistory.js';

/**
 * Reads one page of `userId`'s call history from the query (pageQuery; `missed=true` for missed
 * calls only): `{ "calls": [...], "nextCursor": string | null }`, newest first
 * (docs/call-history.md). Shared by the device route and the server API's.
 */
export async function historyPage(history: CallHistory, userId: string, ctx: RequestContext): Promise<Reply> {
  const { q, cursor, limit } = pageQuery(ctx);
  const rawMissed = q.get('missed');
  if (rawMissed !== null && rawMissed !== 'true' && rawMissed !== 'false') throw errors.invalidRequest('missed: must be true or false');
  const page = await history.read(userId, { cursor, limit, missed: rawMissed === 'true' });
  // Stored records are already JSON text: splice them in.
  return { status: 200, body: `{"calls":[${page.records.join(',')}],"nextCursor":${JSON.stringify(page.nextCursor)}}` };
}

/** GET /v1/calls?cursor=&limit=&missed=: the signed-in user's own call history, for a recents screen. */
export function callHistoryRoute(deps: { auth: AuthGuard; history: CallHistory }): Route {
  const handler = async (ctx: RequestContext) => historyPage(deps.history, (await authenticate(ctx, deps.auth)).userId, ctx);
  return { method: 'get', pattern: '/v1/calls', handler };
}
