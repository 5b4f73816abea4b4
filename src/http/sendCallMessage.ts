import { randomUUID } from 'node:crypto';
import type { CallStore, MessageOutcome } from '../calls/store.js';
import { fingerprint } from '../calls/store.js';
import type { RedisRateLimiter } from '../limits/rateLimiter.js';
import { ApiError } from './errors.js';
import { rateLimited } from './request.js';
import { MESSAGE_PAYLOAD_MAX_BYTES } from './schemas.js';

/**
 * Sending an in-call message (docs/api.md "In-call messages"), the same whether it came over HTTP
 * (POST /v1/calls/{id}/messages) or as a signaling frame: size check, the per-call-and-sender
 * rate limit, then lua/sendMessage.lua. Failures are ApiErrors from the error catalogue (both
 * transports answer with its codes).
 */

export interface MessageSender {
  calls: CallStore;
  /** RATE_CALL_MESSAGES_PER_10S (undefined: no limit). */
  limiter: RedisRateLimiter<{ callId: string; userId: string }> | undefined;
}

export interface MessageSent {
  eventId: string;
  callId: string;
  seq: number;
  occurredAtMs: number;
}

export async function sendCallMessage(
  sender: MessageSender,
  from: { userId: string; installationId: string },
  callId: string,
  body: { operationId: string; payload: Record<string, unknown> },
): Promise<MessageSent> {
  const payloadJson = JSON.stringify(body.payload);
  const size = Buffer.byteLength(payloadJson);
  if (size > MESSAGE_PAYLOAD_MAX_BYTES) {
    throw new ApiError('payload_too_large', `payload is ${size} bytes as JSON; the limit is ${MESSAGE_PAYLOAD_MAX_BYTES}`);
  }
  if (sender.limiter) {
    const d = await sender.limiter.hit({ callId, userId: from.userId });
    if (!d.allowed) throw rateLimited('too many messages on this call from this user; retry later', d.retryAfterMs);
  }
  const outcome = await sender.calls.message({
    callId,
    userId: from.userId,
    installationId: from.installationId,
    eventId: randomUUID(),
    payloadJson,
    operationId: body.operationId,
    fingerprint: fingerprint('message', [callId, from.installationId, payloadJson]),
  });
  if (outcome.kind === 'failure') throw messageError(outcome.code);
  return { eventId: outcome.eventId, callId, seq: outcome.seq, occurredAtMs: outcome.occurredAtMs };
}

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
