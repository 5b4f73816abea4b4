import type { Route } from '../router.js';
import { authenticate, parseJsonBody } from '../request.js';
import type { AuthGuard } from '../../auth/guard.js';
import type { CallPolicyStore } from '../../calls/callPolicy.js';
import { callPolicyBody, editPolicy, readPolicy } from '../../commands/callPolicy.js';

/** GET and PUT /v1/call-policy: the signed-in user's own call policy (docs/call-policy.md). */
export function callPolicyRoutes(deps: { auth: AuthGuard; policies: CallPolicyStore }): Route[] {
  return [
    { method: 'get', pattern: '/v1/call-policy', handler: async (ctx) => readPolicy(deps.policies, (await authenticate(ctx, deps.auth)).userId) },
    {
      method: 'put',
      pattern: '/v1/call-policy',
      handler: async (ctx) => {
        const me = await authenticate(ctx, deps.auth);
        return editPolicy(deps.policies, me.userId, parseJsonBody(ctx, callPolicyBody));
      },
    },
  ];
}
