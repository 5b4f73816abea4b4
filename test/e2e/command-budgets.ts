/**
 * What one call lifecycle may cost (test/e2e/command-budget.test.ts, docs/performance.md
 * "Command budget"): the Redis commands it makes Redis run (script calls and the commands inside
 * them), and the round trips the calling app makes (HTTP requests and command frames). A change
 * that needs more raises the number here, in the same commit, and says why on the same line.
 *
 * Measured on a single Redis, every feature on: call history, one webhook endpoint, early
 * events, the default rate limits, a callee with an iPhone (VoIP push) and an Android tablet
 * (FCM), every device on its signaling socket, the caller's answer, end and message sent as
 * command frames, the create the first in its rate-limit windows (a user seldom creates two calls
 * a minute). Each lifecycle runs alone, step by step, each step's work done before the next (so
 * nothing is shared with another lifecycle: a batch of one).
 */
export interface Budget {
  redisCommands: number;
  clientRoundTrips: number;
  why: string;
}

export const BUDGETS = {
  // Round trips: create over HTTP, then command frames on the open socket (answer, message, end).
  // Commands: the call scripts, two rate limits hit inside the create script, each opening its
  // window (2), the busy check (1) and the callee's call policy (1, inside the script) at create; the relay's batches (one append call for the
  // batch's users, with their call indexes; read, acknowledgement, trim); one webhook stream entry
  // per batch (add, read, acknowledgement, and alone here a trim: XPENDING and XTRIM), where a
  // BullMQ job per batch cost 44 (add 10, take 10, finish 24).
  answered: { redisCommands: 93, clientRoundTrips: 4, why: 'scripts 34 (on a single Redis a request binds its operationId and stores its record with one SET … NX GET at its end, was two SETs: 3; end no longer writes the unread per-call history copy: 2; one early notice per change on its shard channel, not one per party: 3; the call is one string, each write one SET with its lifetime and the create\'s SET … NX its callId check, was HSET + PEXPIRE and an EXISTS: 3) + limits (hit inside the create script on a single Redis, was a script call of their own: 1; a window\'s first hit one SET … NX GET, was INCR and PEXPIRE: 2) and busy check 3 + relay 3 batches 40 (one appendEvents per batch for all its users, was one per user: 45; the callee push registrations not read again at the answer, the worker remembers those its invitation rang: 1; a batch\'s log copies published together as one log notice on the shard channel, not one per entry: 1) + 3 webhook stream entries 15 (was 3 BullMQ jobs 132) + the callee\'s call policy read inside the create script 1 (one HMGET of its policy hash, issue 47, docs/call-policy.md)' },
  declined: { redisCommands: 57, clientRoundTrips: 2, why: 'scripts 15 (binding and record one SET: 2; no per-call history copy; one early notice per change; the call one string, SET with its lifetime, the create\'s NX its callId check: 3) + limits inside the create script (was a call of their own: 1; first hit one SET: 2) and busy check 3 + relay 2 batches 28 (one appendEvents per batch, was 32; the callee push registrations not read again at the end, the worker remembers those its invitation rang: 1; the end batch\'s two log copies one log notice: 1) + 2 webhook stream entries 10 (was 2 BullMQ jobs 88) + the callee\'s call policy read inside the create script 1 (one HMGET of its policy hash, issue 47, docs/call-policy.md)' },
  cancelled: { redisCommands: 66, clientRoundTrips: 2, why: 'the end seen on the callee\'s two sockets, one SET each by the gateway (the early copy and the log copy write one), and the alert\'s marks read by the relay, one MGET (docs/protocol.md "Missed-call alerts"; no receipt was sent, so the alert goes at once, without the grace\'s job): 3 + the missed-call alert for the callee\'s Android tablet (docs/protocol.md "Missed-call alerts"): the callee\'s registrations read again at the end (every installation it has now is alerted, not only those the invitation rang: one HGETALL in the append script), the alert\'s claim, one SET … NX, and once accepted the callee\'s alerted calls for the history\'s missedCallAlert, ZADD + ZREMRANGEBYSCORE + PEXPIRE in one round trip: 5 + scripts 15 (binding and record one SET: 2; no per-call history copy; one early notice per change; the call one string, SET with its lifetime, the create\'s NX its callId check: 3) + limits inside the create script (was a call of their own: 1; first hit one SET: 2) and busy check 3 + relay 2 batches 29 (one appendEvents per batch, was 32; the callee push registrations not read again at the end, the worker remembers those its invitation rang: 1) + 2 webhook stream entries 10 (was 2 BullMQ jobs 88) + the callee\'s call policy read inside the create script 1 (one HMGET of its policy hash, issue 47, docs/call-policy.md)' },
  unanswered: { redisCommands: 67, clientRoundTrips: 1, why: 'the end seen on the callee\'s two sockets, one SET each by the gateway (the early copy and the log copy write one), and the alert\'s marks read by the relay, one MGET (docs/protocol.md "Missed-call alerts"; no receipt was sent, so the alert goes at once, without the grace\'s job): 3 + the missed-call alert for the callee\'s Android tablet (docs/protocol.md "Missed-call alerts"): the callee\'s registrations read again at the end (every installation it has now is alerted, not only those the invitation rang: one HGETALL in the append script), the alert\'s claim, one SET … NX, and once accepted the callee\'s alerted calls for the history\'s missedCallAlert, ZADD + ZREMRANGEBYSCORE + PEXPIRE in one round trip: 5 + create 7 (binding and record one SET: 1; the call one string, SET with its lifetime, its NX the callId check: 2) + expireDue 8 (no per-call history copy; one early notice per change; the end\'s SET carries the lifetime: 1) + limits inside the create script (was a call of their own: 1; first hit one SET: 2) and busy check 3 + relay 2 batches 30 (one appendEvents per batch, was 34; the callee push registrations not read again at the end, the worker remembers those its invitation rang: 1; the end batch\'s two log copies one log notice: 1) + 2 webhook stream entries 10 (was 2 BullMQ jobs 88) + the callee\'s call policy read inside the create script 1 (one HMGET of its policy hash, issue 47, docs/call-policy.md)' },
} as const satisfies Record<string, Budget>;

/**
 * A count this far under its budget fails too: lower the budget, so that the next change that
 * costs more is seen. (The counts are exact; the margin only spares a budget edit for a command.)
 */
export const SLACK = 2;
