import type { Route } from '../../router.js';
import { errors } from '../../../commands/errors.js';
import { parseParam } from '../../request.js';
import { principalId } from '../../../commands/schemas.js';
import { CallsStillEnding, type UserAdmin } from '../../../users/userAdmin.js';
import { serverRoute, type ServerAuth } from './serverRoute.js';

/** The server API's user routes (docs/server-api.md): sign an installation out, erase a user. Both are idempotent. */
export function serverUserRoutes(auth: ServerAuth, users: UserAdmin): Route[] {
  return [
    serverRoute(auth, 'post', '/v1/server/users/:userId/installations/:installationId/sign-out', async (ctx) => {
      const userId = parseParam('userId', ctx.params[0]!, principalId);
      const installationId = parseParam('installationId', ctx.params[1]!, principalId);
      const r = await users.signOut(userId, installationId);
      return { status: 200, body: JSON.stringify({ installationId, ...r }) };
    }),
    serverRoute(auth, 'del', '/v1/server/users/:userId', async (ctx) => {
      const userId = parseParam('userId', ctx.params[0]!, principalId);
      try {
        const r = await users.erase(userId);
        return { status: 200, body: JSON.stringify({ userId, ...r }) };
      } catch (err) {
        if (err instanceof CallsStillEnding) throw errors.unavailable(err.message);
        throw err;
      }
    }),
  ];
}
