import type { z } from 'zod';
import type { ApiDeps } from './deps.js';
import type { Reply, Route } from './router.js';
import type { Principal } from '../auth/principal.js';
import { callRoute } from './endpoints/callRoute.js';
import { parseJsonBody } from './request.js';

/**
 * A device's command on one call, taken over either transport (docs/signaling.md "Commands"):
 * `POST /v1/calls/{id}/<path>` with the body, or a signaling frame that is the same body plus
 * `type` (the command's name) and `callId`. Both run `run` with the body `body` validated, so the
 * checks, limits, idempotency and outcome are the same; a retry may switch transport.
 */
export interface CallCommand<S extends z.ZodType = z.ZodType> {
  /** The frame's `type`. */
  name: 'answer' | 'end' | 'rename' | 'message';
  /** The route's last path segment. */
  path: string;
  body: S;
  /** The HTTP route's body limit, when larger than BODY_LIMIT_BYTES. */
  bodyLimitBytes?: number;
  /** The outcome as the HTTP reply; refusals throw ApiError. */
  run(deps: CommandDeps, me: Pick<Principal, 'userId' | 'installationId'>, callId: string, body: z.output<S>): Promise<Reply>;
}

/** What the commands need, on the API and on the gateway. */
export type CommandDeps = Pick<ApiDeps, 'calls' | 'limits'>;

/** The command's HTTP route. */
export function commandRoute<S extends z.ZodType>(deps: ApiDeps, command: CallCommand<S>): Route {
  const options = command.bodyLimitBytes ? { bodyLimitBytes: command.bodyLimitBytes } : {};
  return callRoute(deps, 'post', `/v1/calls/:id/${command.path}`, (ctx, me, callId) => command.run(deps, me, callId, parseJsonBody(ctx, command.body)), options);
}
