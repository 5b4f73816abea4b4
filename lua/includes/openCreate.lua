-- The opening both creates share (createCall.lua, createGroupCall.lua): the caller's operation
-- (lua/includes/operationRecord.lua: on a single Redis its writes are held and its binding taken
-- with its record at the end), a replayed request's recorded reply (a cluster's, read now), and,
-- on a cluster, a callId already used (on a single Redis the new call's held SET … NX is that
-- check: lua/includes/callRecord.lua createCallRecord, unless the call is to be a hash, `asHash`).
-- Returns the reply to answer at once, or nil to go on and create the call.
--@include "operationRecord"
local function openCreate(callKey, opKey, fingerprint, bindingKey, firstUseArg, asHash)
  local replay = replayOperation(opKey, fingerprint, openOperation(bindingKey, opKey, fingerprint, firstUseArg))
  if replay then return replay end
  if (not held or asHash) and redis.call('EXISTS', callKey) == 1 then
    -- This very request may have created it before (a replay, or a concurrent copy).
    replay = existingRecord(opKey, fingerprint)
    if replay then return replay end
    -- A callId is never reused, not even by the same caller with another operationId.
    return { 'error', 'call_exists' }
  end
  return nil
end
