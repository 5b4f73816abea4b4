-- Appends one event to the user's event log (lua/appendEvents.lua): payload `p`, its outbox origin
-- `e` ("<shard>:<entry ID>"), and who it is for (`o`: only that installation; `x`: all but that
-- one). Without `create` it never makes the stream (NOMKSTREAM): a log lost as a whole returns
-- nil, so the caller counts what came before as trimmed, then appends with `create`.
local function appendLogEntry(logKey, create, origin, payload, only, except)
  local head = create and { 'XADD', logKey } or { 'XADD', logKey, 'NOMKSTREAM' }
  head[#head + 1] = '*'
  head[#head + 1] = 'p'
  head[#head + 1] = payload
  head[#head + 1] = 'e'
  head[#head + 1] = origin
  if only ~= '' then
    head[#head + 1], head[#head + 2] = 'o', only
  elseif except ~= '' then
    head[#head + 1], head[#head + 2] = 'x', except
  end
  return redis.call(unpack(head))
end
