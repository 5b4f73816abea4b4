--[[
  The call's presence map for its members in the call now (docs/signaling.md "Live signals"):
  entries of members who left, or of an earlier stay, are not returned.

  KEYS[1] callKey
  KEYS[2] presenceKey  the call's presence map (lua/includes/presence.lua)

  Returns { userId1, entryJson1, userId2, entryJson2, … }
]]
local callKey, presenceKey = KEYS[1], KEYS[2]
--@arguments
--@include "callRead"
--@include "presence"

local call = loadCall(callKey)
local out = {}
if not call then return out end
for _, m in ipairs(joinedMembers(call)) do
  local entry = keptPresence(presenceKey, m)
  if entry then
    out[#out + 1] = m.userId
    out[#out + 1] = cjson.encode(entry)
  end
end
return out
