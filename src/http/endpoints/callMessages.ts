import { z } from 'zod';
import type { ApiDeps } from '../deps.js';
import type { Route } from '../router.js';
import { callRoute } from './callRoute.js';
import { errors } from '../../commands/errors.js';

const afterSeqSchema = z.coerce.number().int().min(0);

/**
 * GET /v1/calls/{id}/messages?afterSeq=: the call's messages for this installation (docs/api.md
 * "In-call messages"): how a device that reconnects during a call recovers what it missed.
 */
export function readMessagesRoute(deps: ApiDeps): Route {
  return callRoute(deps, 'get', '/v1/calls/:id/messages', async (ctx, me, callId) => {
    const raw = new URLSearchParams(ctx.query).get('afterSeq');
    const after = raw === null ? { success: true as const, data: 0 } : afterSeqSchema.safeParse(raw);
    if (!after.success) throw errors.invalidRequest('afterSeq: must be a non-negative integer');
    const messages = await deps.calls.messagesFor(callId, me.userId, me.installationId, after.data);
    if (!messages) throw errors.callNotFound();
    // Stored events are already JSON text: splice them in.
    return { status: 200, body: `{"messages":[${messages.join(',')}]}` };
  });
}
