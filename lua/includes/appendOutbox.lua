-- Appends one change of a call to the shard's outbox: the change name, when it happened, and the
-- whole call hash after the change. The relay derives every event and push from this entry.
--@include "fmtInt"
local function appendOutbox(outboxKey, callKey, change, atMs)
  local fields = redis.call('HGETALL', callKey)
  local entry = { 'change', change, 'at', fmtInt(atMs) }
  for i = 1, #fields do entry[#entry + 1] = fields[i] end
  redis.call('XADD', outboxKey, '*', unpack(entry))
  return fields
end
