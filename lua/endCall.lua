--[[
  Ends a call on request of one of its parties (hang-up, cancel, decline, local failure).

  KEYS[1] callKey
  KEYS[2] opKey
  KEYS[3] outboxKey
  KEYS[4] ringingKey  the shard's ring index (a call that stops ringing leaves it)
  KEYS[5] bindingKey  on a single Redis, the user's operationId binding, taken at the end
                      with the record in it (lua/includes/operationRecord.lua); absent on a cluster

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  userId            the requesting user
  installationId    the requesting installation
  reason            the end reason the requesting phone reports (validated by the API)
  forAll            '1': the caller of a group call ends it for everyone (else it leaves)
  firstUse          on a cluster, '1' when the user's operationId binding was new: no record of
                    this operation exists unless a concurrent replay made it
  retention         callMs (lua/includes/retention.lua)
  operationTtlMs    how long the operation's record is kept
  fingerprint       hash of the request; a replay must carry the same
  earlyNotice       '1' on a single Redis: the change's early notice is published
                    (lua/includes/appendOutbox.lua); '' on a cluster
  traceparent       optional: the request's W3C trace context (docs/operations.md "Tracing")

  Rules (see docs/api.md "End reasons"):
    - an already ended call is returned as is (absorbs echoes and retries);
    - echo reasons (remoteEnded, callerCancelled, answeredElsewhere) never change a call;
    - on an accepted call only the caller's calling installation and the answering installation
      are in the call; another installation's end request changes nothing;
    - on a ringing call the callee's `localHangup` is stored as `declined`;
    - on a group call the member leaves, declines or cancels (lua/includes/groupEnd.lua).

  Returns
    { 'fresh' | 'replay', 'ok', 200, fields }
    { 'error', 'not_found' | 'idempotency_conflict' }
]]
local callKey, opKey, outboxKey, ringingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
--@arguments
--@include "retention"
local retention, operationTtlMs = parseRetention(retention), tonumber(operationTtlMs)

--@include "endCallNow"
--@include "openCallChange"
--@include "groupEnd"

local readRecord = openOperation(KEYS[5], opKey, fingerprint, firstUse)

local call, now, reply = openCallChange(callKey, opKey, outboxKey, ringingKey, userId, nil, fingerprint, readRecord, retention, earlyNotice, traceparent)
if reply then return reply end

local state, callerInstallationId, winner = call.values.state, call.values.callerInstallationId, call.values.answeredByInstallationId
local side = (userId == call.values.callerUserId) and 'caller' or 'callee'

local function unchanged()
  return recordUnchanged(opKey, fingerprint, 'ok', 200, callFieldList(call), operationTtlMs, not readRecord)
end

if state == 'ended' then return unchanged() end
if reason == 'remoteEnded' or reason == 'callerCancelled' or reason == 'answeredElsewhere' then
  return unchanged()
end
if isGroup(call) then
  local fields = endForGroupMember(callKey, call, outboxKey, ringingKey, now, retention, userId, installationId, reason, forAll == '1')
  if not fields then return unchanged() end
  return recordOperation(opKey, fingerprint, 'ok', 200, fields, operationTtlMs)
end
if state == 'accepted' then
  -- The installations in the call (src/calls/model.ts inCallInstallation states the same rule).
  local inCall = (side == 'caller' and installationId == callerInstallationId)
    or (side == 'callee' and installationId == winner)
  if not inCall then return unchanged() end
elseif side == 'callee' and reason == 'localHangup' then
  reason = 'declined'
end

local fields = endCallNow(callKey, call, outboxKey, ringingKey, now, reason, side, installationId, retention)
return recordOperation(opKey, fingerprint, 'ok', 200, fields, operationTtlMs)
