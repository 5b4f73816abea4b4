-- Whether `userId` is one of the call's parties: its caller or callee, or a member of a group
-- call. A missing call and a stranger are both answered as not_found, so a call's existence is
-- not revealed to strangers.
--@include "groupMembers"
local function isParty(call, userId)
  if call == nil then return false end
  if isGroup(call) then return memberOf(call, userId) ~= nil end
  return userId == call.values.callerUserId or userId == call.values.calleeUserId
end
