-- Whether `userId` is one of the call's members (lua/includes/groupMembers.lua callMembers: the
-- caller and callee of a one-to-one call). A missing call and a stranger are both answered as
-- not_found, so a call's existence is not revealed to strangers.
--@include "groupMembers"
local function isParty(call, userId)
  if call == nil then return false end
  for _, m in ipairs(callMembers(call)) do
    if m.userId == userId then return true end
  end
  return false
end
