-- A call's record, read once per script and kept as a Lua table, so a script reads the call with
-- one GET and derives its outbox entry and reply from the table instead of reading it again.
-- `names` keeps the field order (as stored, new fields last); `values` maps them.
--
-- The record is one string key: the JSON list of its fields and values, in order (name, value,
-- name, value, …, all strings; src/calls/storedCall.ts reads it; a new call's first fields are
-- callId, state, revision, the caller's and createdAtMs, lua/includes/newCall.lua, which a live
-- signal's check reads alone: lua/includes/presence.lua signalSender), so a write and the
-- key's lifetime are one SET (`PX` or `KEEPTTL`) where a hash needed an HSET and a PEXPIRE, and a
-- create's first SET is also its "callId unused" check (`NX`).
--
-- A call keeps the form it was created in. One stored as a hash (by an earlier version, or
-- created with CALL_RECORD_FORMAT=hash for a rolling upgrade from one: docs/operations.md
-- "Upgrading") is read with HGETALL once its GET fails WRONGTYPE, and written with HSET (and
-- PEXPIRE for a new lifetime), so that a process of an earlier version can still read it.

-- The call from its fields as a flat list (name, value, …).
local function callFromFlat(flat, hash)
  local call = { names = {}, values = {}, hash = hash }
  for i = 1, #flat, 2 do
    call.names[#call.names + 1] = flat[i]
    call.values[flat[i]] = flat[i + 1]
  end
  return call
end

-- The call as its string key stores it (what GET returned).
local function decodeCall(stored)
  return callFromFlat(cjson.decode(stored), false)
end

-- The call, or nil when it does not exist.
local function loadCall(callKey)
  local stored = redis.pcall('GET', callKey)
  if type(stored) == 'table' and stored.err ~= nil then return callFromFlat(redis.call('HGETALL', callKey), true) end
  if not stored then return nil end
  return decodeCall(stored)
end
