--[[
  Creates a ringing call, atomically with its idempotency record, its outbox entry and its ring
  timer (the shard's ring index).

  KEYS[1] callKey     the call's record (lua/includes/callRecord.lua)
  KEYS[2] opKey       this operation's idempotency record on a cluster (and of bindings from
                      earlier versions)
  KEYS[3] outboxKey   the call shard's outbox stream
  KEYS[4] ringingKey  the call shard's ring index (sorted set: callId by expiresAtMs), read by
                      the ring sweeps (lua/expireDue.lua)
  KEYS[5] bindingKey  on a single Redis, the caller's operationId binding, taken at the end
                      with the record in it (lua/includes/operationRecord.lua); absent on a cluster
  KEYS[6..]           on a single Redis, the counters of the create's rate limits (`limits`),
                      then the callee's policy hash and allow list (`policyAt`); none on a cluster

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  callId
  callerUserId
  callerInstallationId
  callerDisplayName     (already cut to 256 UTF-8 bytes)
  callerHandle
  video                 '1' or '0'
  ringTimeoutMs         expiresAtMs = now + ringTimeoutMs
  retention             callMs: how long the call is kept after it can no longer change
                        (lua/includes/retention.lua)
  operationTtlMs        how long the idempotency record is kept
  fingerprint           hash of the request; a replay must carry the same
  firstUse              on a cluster, '1' when the caller's operationId binding was new: no record
                        of this operation can exist unless a concurrent replay made it
  earlyNotice           '1' on a single Redis: the change's early notice is published
                        (lua/includes/appendOutbox.lua); '' on a cluster
  limits                on a single Redis, the rules of KEYS[6..]: JSON [[limit, windowMs], ...]
                        (lua/includes/createLimits.lua); '' for none
  recordFormat          'hash' to store the call as a hash (CALL_RECORD_FORMAT, for a rolling
                        upgrade from a version that reads only hashes: lua/includes/callRead.lua);
                        '' for the string
  calleeUserId
  busy                  '1' when the callee is in an accepted call (and call waiting is off): the
                        call is created already ended as `busy`, so it never rings
  policyAt              on a single Redis, the index in KEYS of the callee's policy hash, its allow list
                        after it (lua/includes/callPolicy.lua); '' on a cluster
  screened              on a cluster, the callee's verdict read before the script
                        (lua/readCallPolicy.lua); '' on a single Redis
  screenedReply         what a screened caller is shown: 'unanswered' (it rings out) or 'busy'
                        (SCREENED_CALL_REPLY, docs/call-policy.md)
  traceparent           optional: the request's W3C trace context (docs/operations.md "Tracing")

  Returns one of
    { 'fresh' | 'replay', code, status, fields }  code 'ok' (status 201); fields = the call
    { 'error', 'idempotency_conflict' | 'call_exists' }
    { 'limited', n, retryAfterMs }  the n-th rate limit refused the create: nothing else was done
]]
local callKey, opKey, outboxKey, ringingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
--@arguments
--@include "retention"
local ringTimeoutMs, retention, operationTtlMs = tonumber(ringTimeoutMs), parseRetention(retention), tonumber(operationTtlMs)
local busy = busy == '1'

--@include "fmtInt"
--@include "nowMs"
--@include "callRecord"
--@include "appendOutbox"
--@include "endCallNow"
--@include "openCreate"
--@include "newCall"
--@include "createLimits"
--@include "callPolicy"

-- The callee's call policy, read here so that no call rings past a block set before it
-- (docs/call-policy.md). A screened call is recorded as such; nothing of it reaches the callee,
-- nor counts toward its invitations.
local now = nowMs()
if policyAt ~= '' then screened = screenCall(tonumber(policyAt), callerUserId, now) end

-- The limits first: a create over one changes nothing but the counters.
local limited = hitCreateLimits(6, limits, screened ~= '' and { [calleeUserId] = screened } or {})
if limited then return limited end

local asHash = recordFormat == 'hash'
local opening = openCreate(callKey, opKey, fingerprint, KEYS[5], firstUse, asHash)
if opening then return opening end
local call = { names = {}, values = {}, hash = asHash, trace = traceparent, early = earlyNotice }
-- Kept through the ring window and then for the retention period, even if nothing ends it.
if screened ~= '' then
  setNewCall(callKey, call, now, ringTimeoutMs, ringTimeoutMs + retention.call, calleeUserId, 'screened', screened)
else
  setNewCall(callKey, call, now, ringTimeoutMs, ringTimeoutMs + retention.call, calleeUserId)
end
local fields
if busy or screenedAsBusy(screened, screenedReply) then
  -- Born ended: revision 2, one `ended` change in the outbox and no `created` (nothing rings).
  fields = endCallNow(callKey, call, outboxKey, ringingKey, now, 'busy', 'system', '', retention)
else
  -- Its ring timer: the sweeps end it as `unanswered` once due, unless it stops ringing first.
  write('ZADD', ringingKey, now + ringTimeoutMs, callId)
  fields = appendOutbox(outboxKey, call, 'created', now)
end
return recordOperation(opKey, fingerprint, 'ok', 201, fields, operationTtlMs)
