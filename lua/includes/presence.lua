-- A call's presence map (docs/signaling.md "Live signals"): each joined member's current live
-- signal state, a hash userId -> JSON { stay, muted, speaking, handRaised, video }. An entry
-- counts only for the joined stay it was written in (the member's installation and join time),
-- so a member who left, moved or joined again starts with no state; the map itself expires a
-- while after its last write (src/gateway/signals.ts PRESENCE_TTL_MS).

--@include "callRead"

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

-- What a live signal from `userId` needs, through the call's signal view (src/redis/keys.ts
-- callSignalView): nil when there is no such call; else `{ joined = false }` when the sender is not
-- a member in the call; else `{ joined = true, installationId, joinedAtMs, count, to }`: the
-- sender's joined installation and join time, and its recipients (the other members in the call
-- from their joined installations), `count` of them in `to` as `userId\tinstallationId\t…`.
--
-- The view is a hash of `head`, the first bytes of the call's stored string when the view was made
-- (through its createdAtMs: lua/includes/callRead.lua keeps callId, state, revision, the
-- caller's fields and createdAtMs first, in that order), and one field `m:<userId>` per member in
-- the call (`installationId\tjoinedAtMs\tcount\n` then `to`; ids hold no control character). A
-- signal reads the view's head and the sender's field with one HMGET and the record's same bytes
-- with one GETRANGE; while they are equal the members are the same, and the sender's field
-- answers. That holds because every write that changes who is in the call (a member who joins,
-- leaves, is rung out or moves; an answer; the end) also counts a new revision or state, and the
-- createdAtMs tells this call from a later one under the same callId. Reading and comparing the
-- whole record (a few KB for a group call) cost Redis about 11 µs a signal, the head about 3; the
-- view's making (the record's JSON decoded, its members walked) is done again at the first signal
-- after any such write, and the view expires `viewTtlMs` after it was made.
local SIGNAL_VIEW_HEAD_END = '"createdAtMs","[^"]*"'

local function signalSender(callKey, viewKey, viewTtlMs, userId)
  local field = 'm:' .. userId
  local view = redis.call('HMGET', viewKey, 'head', field)
  local mine
  if view[1] then
    -- A call stored as a hash (a rolling upgrade) has no view: GETRANGE fails on it.
    local head = redis.pcall('GETRANGE', callKey, 0, #view[1] - 1)
    if head == view[1] then
      mine = view[2]
      if not mine then return { joined = false } end
    end
  end
  if not mine then
    local stored = redis.pcall('GET', callKey)
    local hash = type(stored) == 'table' and stored.err ~= nil
    if not hash and not stored then return nil end
    -- Made from the record (a call stored as a hash, by a rolling upgrade, always is: no view).
    local members = joinedMembers(hash and callFromFlat(redis.call('HGETALL', callKey), true) or decodeCall(stored))
    local fields = {}
    for _, m in ipairs(members) do
      local to, count = {}, 0
      for _, r in ipairs(members) do
        if r.userId ~= m.userId and r.installationId then
          to[#to + 1] = r.userId .. '\t' .. r.installationId
          count = count + 1
        end
      end
      local value = (m.installationId or '') .. '\t' .. tostring(m.joinedAtMs or '') .. '\t' .. count .. '\n' .. table.concat(to, '\t')
      fields[#fields + 1] = 'm:' .. m.userId
      fields[#fields + 1] = value
      if m.userId == userId then mine = value end
    end
    if not hash then
      -- No createdAtMs (never so for a call this version stores): the whole record is the head.
      local _, headEnd = string.find(stored, SIGNAL_VIEW_HEAD_END)
      redis.call('DEL', viewKey)
      redis.call('HSET', viewKey, 'head', string.sub(stored, 1, headEnd or #stored), unpack(fields))
      redis.call('PEXPIRE', viewKey, viewTtlMs)
    end
    if not mine then return { joined = false } end
  end
  local installationId, joinedAtMs, count, to = string.match(mine, '^([^\t]*)\t([^\t]*)\t(%d+)\n(.*)$')
  return { joined = true, userId = userId, installationId = installationId, joinedAtMs = joinedAtMs ~= '' and joinedAtMs or nil, count = tonumber(count), to = to }
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
