--@include "fmtInt"
--@include "heldWrites"

-- A call hash read once per script and kept as a Lua table, so a script reads the call with one
-- HGETALL and derives its outbox entry and reply from the table instead of reading it again.
-- `names` keeps the field order (as HGETALL returned it, new fields last); `values` maps them.

-- The call, or nil when it does not exist.
local function loadCall(callKey)
  local flat = redis.call('HGETALL', callKey)
  if #flat == 0 then return nil end
  local call = { names = {}, values = {} }
  for i = 1, #flat, 2 do
    call.names[#call.names + 1] = flat[i]
    call.values[flat[i]] = flat[i + 1]
  end
  return call
end

-- Writes field/value pairs to the hash and to the table.
local function setCallFields(callKey, call, ...)
  local kv = { ... }
  for i = 1, #kv, 2 do
    local name = kv[i]
    if call.values[name] == nil then call.names[#call.names + 1] = name end
    call.values[name] = kv[i + 1]
  end
  write('HSET', callKey, unpack(kv))
end

-- The call's fields as HGETALL would return them.
local function callFieldList(call)
  local flat = {}
  for _, name in ipairs(call.names) do
    flat[#flat + 1] = name
    flat[#flat + 1] = call.values[name]
  end
  return flat
end

-- The next revision (revisions count every change of the call).
local function nextRevision(call)
  return fmtInt(tonumber(call.values.revision) + 1)
end
