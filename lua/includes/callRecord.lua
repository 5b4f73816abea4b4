--@include "fmtInt"
--@include "heldWrites"
--@include "callRead"

-- Writing a call's record (lua/includes/callRead.lua has its form and its reading): in its Lua
-- table, and to its key in the form it was created in.

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
