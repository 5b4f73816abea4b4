import type { Principal } from '../auth/principal.js';
import type { CallCommand, CommandDeps, Reply } from '../commands/command.js';
import { ApiError, errors, problemReply, unavailableError } from '../commands/errors.js';
import { opaqueId } from '../commands/schemas.js';
import type { Logger } from '../util/logger.js';
import type { ClientFrame } from './protocol.js';

/**
 * A command frame (docs/signaling.md "Commands"): the frame is the HTTP route's body plus `type`
 * and `callId`, run by the same command (src/commands/) as the route; its outcome, or its
 * refusal as a problem, is what the `reply` frame carries.
 */
export async function commandReply(
  deps: CommandDeps,
  me: Pick<Principal, 'userId' | 'installationId'>,
  command: CallCommand,
  frame: ClientFrame,
  logger: Logger,
): Promise<Reply> {
  try {
    const callId = opaqueId.safeParse(frame.callId);
    if (!callId.success) throw errors.invalidRequest(`callId: ${callId.error.issues[0]?.message ?? 'invalid'}`);
    const body = command.body.safeParse(frame);
    if (!body.success) throw errors.invalidFields(body.error.issues);
    return await command.run(deps, me, callId.data, body.data);
  } catch (err) {
    const refusal = err instanceof ApiError ? err : unavailableError(err);
    if (!refusal) logger.error({ err, userId: me.userId, command: command.name }, 'command over signaling failed');
    return problemReply(refusal ?? errors.internal('internal error; retry with the same operationId'));
  }
}
