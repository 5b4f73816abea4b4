-- The call's caller and callee, or nil when the call does not exist or `userId` is neither
-- (both answered as not_found, so a call's existence is not revealed to strangers).
local function callParties(callKey, userId)
  local callerUserId, calleeUserId = unpack(redis.call('HMGET', callKey, 'callerUserId', 'calleeUserId'))
  if not callerUserId or (userId ~= callerUserId and userId ~= calleeUserId) then return nil end
  return callerUserId, calleeUserId
end
