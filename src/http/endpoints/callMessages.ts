import { z } from 'zod';
import type { ApiDeps } from '../deps.js';
import type { Route } from '../router.js';
import { callRoute } from './callRoute.js';
import { parseJsonBody } from '../request.js';
import { MESSAGE_MAX_BYTES, sendMessageBody } from '../schemas.js';
import { ApiError } from '../errors.js';
import { sendCallMessage } from '../sendCallMessage.js';

/**
 * POST /v1/calls/{id}/messages: an in-call message (SDP, ICE candidates, anything the apps agree
 * on) for the other party's installation in the call; delivered as a `call.message` signaling
 * frame (docs/api.md "In-call messages").
 */
export function sendMessageRoute(deps: ApiDeps): Route {
  // Its own body limit: a payload of the maximum size fits whatever BODY_LIMIT_BYTES says.
  return callRoute(deps, 'post', '/v1/calls/:id/messages', async (ctx, me, callId) => {
    const body = parseJsonBody(ctx, sendMessageBody);
    const sent = await sendCallMessage({ calls: deps.calls, limiter: deps.limits.callMessages }, me, callId, body);
    return { status: 200, body: JSON.stringify(sent) };
  }, { bodyLimitBytes: MESSAGE_MAX_BYTES });
}

const afterSeqSchema = z.coerce.number().int().min(0);

/**
 * GET /v1/calls/{id}/messages?afterSeq=: the call's messages for this installation (docs/api.md
 * "In-call messages"): how a device that reconnects during a call recovers what it missed.
 */
export function readMessagesRoute(deps: ApiDeps): Route {
  return callRoute(deps, 'get', '/v1/calls/:id/messages', async (ctx, me, callId) => {
    const raw = new URLSearchParams(ctx.query).get('afterSeq');
    const after = raw === null ? { success: true as const, data: 0 } : afterSeqSchema.safeParse(raw);
    if (!after.success) throw new ApiError('invalid_request', 'afterSeq: must be a non-negative integer');
    const messages = await deps.calls.messagesFor(callId, me.userId, me.installationId, after.data);
    if (!messages) throw new ApiError('not_found', 'call not found');
    // Stored events are already JSON text: splice them in.
    return { status: 200, body: `{"messages":[${messages.join(',')}]}` };
  });
}
