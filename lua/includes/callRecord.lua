--@include "fmtInt"
--@include "heldWrites"

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

-- The call's fields as a flat list (name, value, …), in order.
local function callFieldList(call)
  local flat = {}
  for _, name in ipairs(call.names) do
    flat[#flat + 1] = name
    flat[#flat + 1] = call.values[name]
  end
  return flat
end

-- Sets field/value pairs in the table.
local function setInTable(call, kv)
  for i = 1, #kv, 2 do
    local name = kv[i]
    if call.values[name] == nil then call.names[#call.names + 1] = name end
    call.values[name] = kv[i + 1]
  end
end

-- Sets field/value pairs in the table and returns the whole call as its string key stores it.
local function encodeCall(call, kv)
  setInTable(call, kv)
  return cjson.encode(callFieldList(call))
end

-- A call kept as a hash: the pairs with HSET, and its new lifetime, if any, with PEXPIRE.
local function writeHashFields(callKey, call, ttlMs, kv)
  setInTable(call, kv)
  write('HSET', callKey, unpack(kv))
  if ttlMs then write('PEXPIRE', callKey, ttlMs) end
end

-- Writes field/value pairs to the table and the call to its key. `ttlMs`: the key's new
-- lifetime, or nil to keep the one it has.
local function setCallFields(callKey, call, ttlMs, ...)
  if call.hash then
    writeHashFields(callKey, call, ttlMs, { ... })
  elseif ttlMs then
    write('SET', callKey, encodeCall(call, { ... }), 'PX', ttlMs)
  else
    write('SET', callKey, encodeCall(call, { ... }), 'KEEPTTL')
  end
end

-- Writes a new call with these fields, living `ttlMs`. Its SET … NX is also the check that the
-- callId is unused: held (a single Redis), it guards the request's other writes, which run only
-- when it took the key, and the request is refused `call_exists` otherwise
-- (lua/includes/heldWrites.lua). Written at once (a cluster), or as a hash (`call.hash`), the
-- script checked first (lua/includes/openCreate.lua).
local function createCallRecord(callKey, call, ttlMs, ...)
  if call.hash then
    writeHashFields(callKey, call, ttlMs, { ... })
  else
    guardedWrite({ 'error', 'call_exists' }, 'SET', callKey, encodeCall(call, { ... }), 'PX', ttlMs, 'NX')
  end
end

-- The next revision (revisions count every change of the call).
local function nextRevision(call)
  return fmtInt(tonumber(call.values.revision) + 1)
end
