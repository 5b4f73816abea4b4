-- Whether `userId` is the call's caller or callee. A missing call and a stranger are both answered
-- as not_found, so a call's existence is not revealed to strangers.
local function isParty(call, userId)
  return call ~= nil and (userId == call.values.callerUserId or userId == call.values.calleeUserId)
end
