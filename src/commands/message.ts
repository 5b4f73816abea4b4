import { randomUUID } from 'node:crypto';
import { MESSAGE_MAX_BYTES, MESSAGE_PAYLOAD_MAX_BYTES } from '../config/messageLimits.js';
import { sendMessageBody } from './schemas.js';
import { errors, ApiError } from './errors.js';
import { fingerprint, type MessageOutcome } from '../calls/store.js';
import type { CallCommand } from './command.js';

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
      throw errors.payloadTooLarge(`payload is ${size} bytes as JSON; the limit is ${MESSAGE_PAYLOAD_MAX_BYTES}`);
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
    if (outcome.kind === 'limited') throw errors.rateLimited('too many messages on this call from this user; retry later', outcome.retryAfterMs);
    if (outcome.kind === 'failure') throw messageError(outcome.code);
    const sent = { eventId: outcome.eventId, callId, seq: outcome.seq, occurredAtMs: outcome.occurredAtMs };
    return { status: 200, body: JSON.stringify(sent) };
  },
};

function messageError(code: Extract<MessageOutcome, { kind: 'failure' }>['code']): ApiError {
  switch (code) {
    case 'not_found':
      return errors.callNotFound();
    case 'forbidden':
      return errors.forbidden(
        "only the installations in the call may send messages (the caller's calling installation, a ringing callee installation, or the answering one)",
      );
    case 'idempotency_conflict':
      return errors.idempotencyConflict();
    case 'call_not_active':
      return errors.callNotActive();
    case 'not_pair':
      return errors.invalidRequest('in-call messages are for one-to-one calls; a group call shares its media through the SFU (docs/group-calls.md)');
  }
}
