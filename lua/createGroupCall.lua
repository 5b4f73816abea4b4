--[[
  Creates a ringing group call (docs/group-calls.md): the caller and its invitees, atomically
  with its idempotency record, its outbox entry (one `created` change: the relay invites every
  invitee not busy) and its ring timer.

  KEYS[1..5] as lua/createCall.lua: the call's record, this operation's idempotency record, the call
  shard's outbox stream and ring index, and on a single Redis the caller's operationId binding
  KEYS[6..]  as lua/createCall.lua: on a single Redis, the counters of the create's rate limits

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order): as in
  lua/createCall.lua, callId, callerUserId, callerInstallationId, callerDisplayName,
  callerHandle, video, ringTimeoutMs (each invitee's ring window), retention, operationTtlMs,
  fingerprint, firstUse, earlyNotice, limits and recordFormat; then
  invitees              JSON array of userIds (distinct, without the caller; checked by the API)
  busy                  JSON array: the invitees in an accepted call (call waiting off); they
                        start `busy` and are not rung
  title                 '' or the call's title (already cut), shown as the invitation's displayName
  policyAt              on a single Redis, the index in KEYS of the first invitee's policy hash and
                        allow list, two keys per invitee in `invitees`' order
                        (lua/includes/callPolicy.lua); '' on a cluster
  screened              on a cluster, JSON object userId -> verdict read before the script
                        (lua/readCallPolicy.lua); '' on a single Redis
  screenedReply         as lua/createCall.lua: a screened invitee rings out for the others
                        ('unanswered': it stays `invited` until its ring window ends) or is `busy`
  traceparent           optional: the request's W3C trace context (docs/operations.md "Tracing")

  Returns one of
    { 'fresh' | 'replay', 'ok', 201, fields }
    { 'error', 'idempotency_conflict' | 'call_exists' }
    { 'limited', n, retryAfterMs }  as lua/createCall.lua: nothing else was done
  When every invitee is busy, the call is created already ended (`busy`, by the system).
]]
local callKey, opKey, outboxKey, ringingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
--@arguments
--@include "retention"
local ringTimeoutMs, retention, operationTtlMs = tonumber(ringTimeoutMs), parseRetention(retention), tonumber(operationTtlMs)

--@include "fmtInt"
--@include "nowMs"
--@include "callRecord"
--@include "appendOutbox"
--@include "groupRules"
--@include "openCreate"
--@include "newCall"
--@include "createLimits"
--@include "callPolicy"

local now = nowMs()
local inviteeIds = cjson.decode(invitees)
-- Each invitee's own call policy (docs/call-policy.md "Group calls"): a screened member is never
-- rung (src/events/audience.ts, src/push/planner.ts), looks to the others as one that rang out,
-- and the call does not count toward its invitations.
local verdicts = screenInvitees(inviteeIds, policyAt, screened, callerUserId, now)

-- The limits first: a create over one changes nothing but the counters.
local limited = hitCreateLimits(6, limits, verdicts)
if limited then return limited end

local asHash = recordFormat == 'hash'
local opening = openCreate(callKey, opKey, fingerprint, KEYS[5], firstUse, asHash)
if opening then return opening end

local busyUsers = {}
for _, u in ipairs(cjson.decode(busy)) do busyUsers[u] = true end
local members = { { userId = callerUserId, state = 'joined', installationId = callerInstallationId, joinedAtMs = now } }
for _, u in ipairs(inviteeIds) do
  local m
  if busyUsers[u] or screenedAsBusy(verdicts[u], screenedReply) then
    m = { userId = u, state = 'busy', invitedAtMs = now, endedAtMs = now }
  else
    m = { userId = u, state = 'invited', invitedAtMs = now, ringUntilMs = now + ringTimeoutMs }
  end
  m.screened = verdicts[u]
  members[#members + 1] = m
end
local call = { names = {}, values = {}, hash = asHash, trace = traceparent, early = earlyNotice, members = members }
-- Kept through the ring window and then for the retention period, even if nothing ends it.
setNewCall(callKey, call, now, ringTimeoutMs, ringTimeoutMs + retention.call, '', 'kind', 'group', 'title', title, 'members', cjson.encode(members))
local fields
if countMembers(call, isRinging) == 0 then
  -- Everyone busy: born ended, as a one-to-one call to a busy callee is.
  fields = endCallNow(callKey, call, outboxKey, ringingKey, now, 'busy', 'system', '', retention)
else
  scheduleRing(ringingKey, call)
  fields = appendOutbox(outboxKey, call, 'created', now)
end
return recordOperation(opKey, fingerprint, 'ok', 201, fields, operationTtlMs)
