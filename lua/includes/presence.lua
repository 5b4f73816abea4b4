-- A call's presence map (docs/signaling.md "Live signals"): each joined member's current live
-- signal state, a hash userId -> JSON { stay, muted, speaking, handRaised, video }. An entry
-- counts only for the joined stay it was written in (the member's installation and join time),
-- so a member who left, moved or joined again starts with no state; the map itself expires a
-- while after its last write (src/gateway/signals.ts PRESENCE_TTL_MS).

-- The members in the call now ({ userId, installationId, joinedAtMs }), the caller first: a group
-- call's joined members, a one-to-one call's caller and, once answered, its callee. Read here
-- rather than through lua/includes/groupMembers.lua, whose call machine tables would be rebuilt
-- on every signal (a script's includes run on each call).
local function joinedMembers(call)
  local v, out = call.values, {}
  if v.state == 'ended' then return out end
  if v.kind == 'group' then
    for _, m in ipairs(cjson.decode(v.members)) do
      if m.state == 'joined' then out[#out + 1] = m end
    end
    return out
  end
  out[1] = { userId = v.callerUserId, installationId = v.callerInstallationId }
  if v.state == 'accepted' then out[2] = { userId = v.calleeUserId, installationId = v.answeredByInstallationId } end
  return out
end

local function presenceStay(m)
  return (m.installationId or '') .. '/' .. tostring(m.joinedAtMs or '')
end

-- The member's entry for its current stay, or nil.
local function keptPresence(presenceKey, m)
  local kept = redis.call('HGET', presenceKey, m.userId)
  local entry = kept and cjson.decode(kept) or nil
  if entry and entry.stay == presenceStay(m) then return entry end
  return nil
end
