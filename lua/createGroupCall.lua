--[[
  Creates a ringing group call (docs/group-calls.md): the caller and its invitees, atomically
  with its idempotency record, its outbox entry (one `created` change: the relay invites every
  invitee not busy) and its ring timer.

  KEYS[1..5] as lua/createCall.lua: the call's record, this operation's idempotency record, the call
  shard's outbox stream and ring index, and on a single Redis the caller's operationId binding
  KEYS[6..]  as lua/createCall.lua: on a single Redis, the counters of the create's rate limits

  ARGV[1..5] as lua/createCall.lua: callId, callerUserId, callerInstallationId, callerDisplayName,
           callerHandle
  ARGV[6]  invitees              JSON array of userIds (distinct, without the caller; checked by the API)
  ARGV[7]  video                 '1' or '0'
  ARGV[8]  ringTimeoutMs         each invitee's ring window
  ARGV[9]  retention             callMs (lua/includes/retention.lua)
  ARGV[10] operationTtlMs
  ARGV[11] fingerprint
  ARGV[12] busy                  JSON array: the invitees in an accepted call (call waiting off);
                                 they start `busy` and are not rung
  ARGV[13] firstUse              on a cluster, '1' when the caller's operationId binding was new
  ARGV[14] earlyNotice           '1' on a single Redis: the change's early notice is published
                                 (lua/includes/appendOutbox.lua); '' on a cluster
  ARGV[15] limits                as lua/createCall.lua: the rules of KEYS[6..], or ''
  ARGV[16] format                as lua/createCall.lua: 'hash' or ''
  ARGV[17] title                 '' or the call's title (already cut), shown as the invitation's displayName
  ARGV[18] traceparent           optional: the request's W3C trace context (docs/operations.md "Tracing")

  Returns one of
    { 'fresh' | 'replay', 'ok', 201, fields }
    { 'error', 'idempotency_conflict' | 'call_exists' }
    { 'limited', n, retryAfterMs }  as lua/createCall.lua: nothing else was done
  When every invitee is busy, the call is created already ended (`busy`, by the system).
]]
local callKey, opKey, outboxKey, ringingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local callerUserId, callerInstallationId = ARGV[2], ARGV[3]
--@include "retention"
local ringTimeoutMs, retention, operationTtlMs = tonumber(ARGV[8]), parseRetention(ARGV[9]), tonumber(ARGV[10])
local fingerprint = ARGV[11]

--@include "fmtInt"
--@include "nowMs"
--@include "callRecord"
--@include "appendOutbox"
--@include "groupRules"
--@include "openCreate"
--@include "newCall"
--@include "createLimits"

-- The limits first: a create over one changes nothing but the counters.
local limited = hitCreateLimits(6, ARGV[15])
if limited then return limited end

local asHash = ARGV[16] == 'hash'
local opening = openCreate(callKey, opKey, fingerprint, KEYS[5], ARGV[13], asHash)
if opening then return opening end

local now = nowMs()
local busy = {}
for _, u in ipairs(cjson.decode(ARGV[12])) do busy[u] = true end
local members = { { userId = callerUserId, state = 'joined', installationId = callerInstallationId, joinedAtMs = now } }
for _, u in ipairs(cjson.decode(ARGV[6])) do
  if busy[u] then
    members[#members + 1] = { userId = u, state = 'busy', invitedAtMs = now, endedAtMs = now }
  else
    members[#members + 1] = { userId = u, state = 'invited', invitedAtMs = now, ringUntilMs = now + ringTimeoutMs }
  end
end
local call = { names = {}, values = {}, hash = asHash, trace = ARGV[18], early = ARGV[14], members = members }
-- Kept through the ring window and then for the retention period, even if nothing ends it.
setNewCall(callKey, call, now, ringTimeoutMs, ringTimeoutMs + retention.call, '', 'kind', 'group', 'title', ARGV[17], 'members', cjson.encode(members))
local fields
if countMembers(call, isRinging) == 0 then
  -- Everyone busy: born ended, as a one-to-one call to a busy callee is.
  fields = endCallNow(callKey, call, outboxKey, ringingKey, now, 'busy', 'system', '', retention)
else
  scheduleRing(ringingKey, call)
  fields = appendOutbox(outboxKey, call, 'created', now)
end
return recordOperation(opKey, fingerprint, 'ok', 201, fields, operationTtlMs)
