-- A call's presence map (docs/signaling.md "Live signals"): each joined member's current live
-- signal state, a hash userId -> JSON { stay, muted, speaking, handRaised, video }. An entry
-- counts only for the joined stay it was written in (the member's installation and join time),
-- so a member who left, moved or joined again starts with no state; the map itself expires a
-- while after its last write (src/gateway/signals.ts PRESENCE_TTL_MS).

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
