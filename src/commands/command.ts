import type { z } from 'zod';
import type { Principal } from '../auth/principal.js';
import type { CallStore } from '../calls/store.js';
import type { CreateLimit } from '../calls/scriptArgs.js';
import type { RedisRateLimiter } from '../limits/rateLimiter.js';
import type { MissedCallSeen } from '../push/missedCallSeen.js';

/**
 * A device's command on one call, taken over either transport (docs/signaling.md "Commands"):
 * `POST /v1/calls/{id}/<path>` with the body, or a signaling frame that is the same body plus
 * `type` (the command's name) and `callId`. Both run `run` with the body `body` validated, so the
 * checks, limits, idempotency and outcome are the same; a retry may switch transport. A command
 * knows nothing of either transport: it returns a status and a JSON body, and refuses by throwing
 * ApiError (errors.ts).
 */
export interface CallCommand<S extends z.ZodType = z.ZodType> {
  /** The frame's `type`. */
  name: 'answer' | 'end' | 'move' | 'rename' | 'message' | 'invite' | 'ringing';
  /** The route's last path segment. */
  path: string;
  body: S;
  /** The HTTP route's body limit, when larger than BODY_LIMIT_BYTES. */
  bodyLimitBytes?: number;
  /** The outcome; refusals throw ApiError. */
  run(deps: CommandDeps, me: Pick<Principal, 'userId' | 'installationId'>, callId: string, body: z.output<S>): Promise<Reply>;
}

/** A command's outcome as both transports send it: an HTTP status and a JSON text. */
export interface Reply {
  status: number;
  /** A JSON text (already serialised), or undefined for no body. */
  body?: string;
  contentType?: string;
  headers?: Record<string, string>;
}

/** Per-user and per-installation limits (docs/api.md "Abuse limits"); undefined when switched off. */
export interface Limits {
  callCreates: RedisRateLimiter<{ userId: string }> | undefined;
  /** Invitations to one callee from all callers together. */
  invitesPerCallee: RedisRateLimiter<{ calleeUserId: string }> | undefined;
  pushTokenWrites: RedisRateLimiter<{ userId: string; installationId: string }> | undefined;
  renames: RedisRateLimiter<{ userId: string }> | undefined;
  // In-call messages per call and sender are counted by the message script (StoreSettings.messagesPerWindow).
}

/**
 * Each invitee's invitation limit for a create or an invite, naming its invitee: the store hits it
 * once the invitee's call policy is read, and not when that policy screens the call.
 */
export function inviteeLimits(limits: Limits, userIds: readonly string[]): CreateLimit[] {
  const perCallee = limits.invitesPerCallee;
  return perCallee ? userIds.map((u) => ({ ...perCallee.counter({ calleeUserId: u }), invitee: u })) : [];
}

/** What the commands need, on the API and on the gateway. */
export interface CommandDeps {
  calls: CallStore;
  limits: Limits;
  /** Notes each installation's ringing receipt for its missed-call alert (src/push/missedCallSeen.ts); none when left out. */
  missedCallSeen?: Pick<MissedCallSeen, 'noteRang'>;
}
