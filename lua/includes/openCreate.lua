-- The opening both creates share (createCall.lua, createGroupCall.lua): the caller's operationId
-- binding (lua/includes/operationRecord.lua), a replayed request's recorded reply, and a callId
-- already used. Returns the reply to answer at once, or nil to go on and create the call.
--@include "operationRecord"
local function openCreate(callKey, opKey, fingerprint, operationTtlMs, bindingKey, firstUseArg)
  local conflict, firstUse = bindOperation(bindingKey, fingerprint, operationTtlMs, firstUseArg)
  if conflict then return { 'error', 'idempotency_conflict' } end
  local replay = replayOperation(opKey, fingerprint, not firstUse)
  if replay then return replay end
  if redis.call('EXISTS', callKey) == 1 then
    -- A concurrent replay of this very request may have created it first.
    replay = firstUse and replayOperation(opKey, fingerprint, true)
    if replay then return replay end
    -- A callId is never reused, not even by the same caller with another operationId.
    return { 'error', 'call_exists' }
  end
  return nil
end
