import type { ApiDeps } from '../deps.js';
import type { RequestContext, Route } from '../router.js';
import { authenticate, parseJsonBody, parseParam } from '../request.js';
import { principalId, pushTokenBody, pushTokenKind } from '../../commands/schemas.js';
import { errors } from '../../commands/errors.js';
import { tokenSuffix } from '../../push/registry.js';
import type { Principal } from '../../auth/principal.js';
import { isIosKind } from '../../push/kinds.js';

const PATTERN = '/v1/installations/:id/push-tokens/:kind';

/** Path checks shared by PUT and DELETE: the installation must be the session's own. */
function target(ctx: RequestContext, me: Principal) {
  const installationId = parseParam('id', ctx.params[0]!, principalId);
  const kind = parseParam('kind', ctx.params[1]!, pushTokenKind);
  if (installationId !== me.installationId) {
    throw errors.forbidden("installation ID in the path does not match the session's installation");
  }
  return { installationId, kind };
}

/** PUT: stores the installation's token for `kind` (iosVoip and iosAlert need iosEnvironment; androidPush refuses it). */
export function putPushTokenRoute(deps: ApiDeps): Route {
  return {
    method: 'put',
    pattern: PATTERN,
    handler: async (ctx) => {
      const me = await authenticate(ctx, deps.auth);
      const { installationId, kind } = target(ctx, me);
      const body = parseJsonBody(ctx, pushTokenBody);
      if (isIosKind(kind) && body.iosEnvironment === undefined) {
        throw errors.invalidRequest(`iosEnvironment: required for ${kind} tokens ("production" or "development")`);
      }
      if (kind === 'androidPush' && body.iosEnvironment !== undefined) {
        throw errors.invalidRequest('iosEnvironment: not allowed for androidPush tokens');
      }
      if (isIosKind(kind) && !/^[0-9a-fA-F]{64,200}$/.test(body.token)) {
        throw errors.invalidRequest(`token: an ${kind} token is the device token in hexadecimal (at least 64 digits)`);
      }
      if (deps.pushApps) {
        const app = deps.pushApps.get(body.appId);
        if (!app) throw errors.invalidRequest(`appId: "${body.appId}" is not an app of this deployment`);
        if (!(isIosKind(kind) ? app.ios : app.android)) {
          throw errors.invalidRequest(`appId: "${body.appId}" has no ${isIosKind(kind) ? 'iOS' : 'Android'} push configured`);
        }
      }
      if (deps.limits.pushTokenWrites) {
        const d = await deps.limits.pushTokenWrites.hit({ userId: me.userId, installationId });
        if (!d.allowed) throw errors.rateLimited('too many push token writes from this installation; retry later', d.retryAfterMs);
      }
      const saved = await deps.pushRegistry.register({
        userId: me.userId,
        installationId,
        kind,
        token: body.token,
        appId: body.appId,
        ...(body.iosEnvironment ? { iosEnvironment: body.iosEnvironment } : {}),
      });
      return {
        status: 200,
        body: JSON.stringify({
          installationId,
          kind,
          appId: saved.appId,
          ...(saved.iosEnvironment ? { iosEnvironment: saved.iosEnvironment } : {}),
          tokenSuffix: tokenSuffix(saved.token),
          updatedAtMs: saved.updatedAtMs,
        }),
      };
    },
  };
}

/** DELETE: unregisters (sign-out). Idempotent: 204 whether or not a token was stored. */
export function deletePushTokenRoute(deps: ApiDeps): Route {
  return {
    method: 'del',
    pattern: PATTERN,
    handler: async (ctx) => {
      const me = await authenticate(ctx, deps.auth);
      const { installationId, kind } = target(ctx, me);
      await deps.pushRegistry.remove(me.userId, installationId, kind);
      return { status: 204 };
    },
  };
}
