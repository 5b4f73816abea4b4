import type { Route } from '../../router.js';
import { parseJsonBody, parseParam } from '../../request.js';
import { principalId } from '../../../commands/schemas.js';
import type { CallPolicyStore } from '../../../calls/callPolicy.js';
import { MAX_IDS_PER_REQUEST } from '../../../calls/callPolicy.js';
import { allowListPageBody, allowListQuery, callPolicyBody, editPolicy, listAllowed, readPolicy, replaceAllowPage } from '../../../commands/callPolicy.js';
import { errors } from '../../../commands/errors.js';
import { serverRoute, type ServerAuth } from './serverRoute.js';

/** The server API's call policy routes (docs/call-policy.md): any user's policy, and its allow list. */
export function serverPolicyRoutes(auth: ServerAuth, policies: CallPolicyStore): Route[] {
  const user = (raw: string) => parseParam('userId', raw, principalId);
  return [
    serverRoute(auth, 'get', '/v1/server/users/:userId/call-policy', async (ctx) => readPolicy(policies, user(ctx.params[0]!))),
    serverRoute(auth, 'put', '/v1/server/users/:userId/call-policy', async (ctx) => editPolicy(policies, user(ctx.params[0]!), parseJsonBody(ctx, callPolicyBody))),
    serverRoute(auth, 'get', '/v1/server/users/:userId/allow-list', async (ctx) => {
      const q = allowListQuery.safeParse(Object.fromEntries(new URLSearchParams(ctx.query)));
      if (!q.success) throw errors.invalidRequest(`${q.error.issues[0]!.path.join('.')}: ${q.error.issues[0]!.message}`);
      return listAllowed(policies, user(ctx.params[0]!), q.data);
    }),
    {
      ...serverRoute(auth, 'put', '/v1/server/users/:userId/allow-list', async (ctx) => replaceAllowPage(policies, user(ctx.params[0]!), parseJsonBody(ctx, allowListPageBody))),
      // A page of MAX_IDS_PER_REQUEST ids of up to 128 characters (JSON-escaped at worst 6 bytes each).
      bodyLimitBytes: MAX_IDS_PER_REQUEST * 800 + 1024,
    },
  ];
}

