import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { ApiDeps } from '../deps.js';
import type { Route } from '../router.js';
import { callRoute } from './callRoute.js';
import { rateLimited } from '../request.js';
import { MESSAGE_MAX_BYTES, MESSAGE_PAYLOAD_MAX_BYTES, sendMessageBody } from '../schemas.js';
import { ApiError } from '../errors.js';
import { fingerprint, type MessageOutcome } from '../../calls/store.js';
import type { CallCommand } from '../callCommand.js';

/**
 * message (POST /v1/calls/{id}/messages or a frame): an in-call message (SDP, ICE candidates,
 * anything the apps agree on) for the other party's installation in the call, delivered as a
 * `message` signaling frame (docs/api.md "In-call messages"). Size check, then lua/sendMessage.lua,
 * which also counts the per-call-and-sender rate limit.
 */
export const messageCommand: CallCommand<typeof sendMessageBody> = {
  name: 'message',
  path: 'messages',
  body: sendMessageBody,
  // Its own body limit: a payload of the maximum size fits whatever BODY_LIMIT_BYTES says.
  bodyLimitBytes: MESSAGE_MAX_BYTES,
  run: async (deps, me, callId, body) => {
    const payloadJson = JSON.stringify(body.payload);
    const size = Buffer.byteLength(payloadJson);
    if (size > MESSAGE_PAYLOAD_MAX_BYTES) {
      throw new ApiError('payload_too_large', `payload is ${size} bytes as JSON; the limit is ${MESSAGE_PAYLOAD_MAX_BYTES}`);
    }
    const outcome = await deps.calls.message({
      callId,
      userId: me.userId,
      installationId: me.installationId,
      eventId: randomUUID(),
      payloadJson,
      operationId: body.operationId,
      fingerprint: fingerprint('message', [callId, me.installationId, payloadJson]),
    });
    if (outcome.kind === 'limited') throw rateLimited('too many messages on this call from this user; retry later', outcome.retryAfterMs);
    if (outcome.kind === 'failure') throw messageError(outcome.code);
    const sent = { eventId: outcome.eventId, callId, seq: outcome.seq, occurredAtMs: outcome.occurredAtMs };
    return { status: 200, body: JSON.stringify(sent) };
  },
};

function messageError(code: Extract<MessageOutcome, { kind: 'failure' }>['code']): ApiError {
  switch (code) {
    case 'not_found':
      return new ApiError('not_found', 'call not found');
    case 'forbidden':
      return new ApiError(
        'forbidden',
        "only the installations in the call may send messages (the caller's calling installation, a ringing callee installation, or the answering one)",
      );
    case 'idempotency_conflict':
      return new ApiError('idempotency_conflict', 'this operationId was already used with a different request');
    case 'call_not_active':
      return new ApiError('call_not_active', 'the call has ended; messages can only be sent while it rings or is accepted');
  }
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
