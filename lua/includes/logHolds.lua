--@include "streamIds"

-- Whether the user's event log already holds an entry made from outbox entry `entryId` of the
-- shard `shardTag` ("<shard>:"), for lua/appendEvents.lua's exactly-once append. Entries already
-- in the log's newest entries are read only when an entry is not new.
local DEDUPE_WINDOW = 64
local SCAN_BATCH = 64
-- Scans from the newest entry back until it finds it, or finds an entry of the same shard older
-- than it once at least DEDUPE_WINDOW entries were looked at (a shard's entries are appended in
-- outbox order, bar the brief overlap of a lease handover that the window covers), or reaches the
-- start of the log. A replay that comes long after (pending entries claimed late, a re-read after
-- a Redis restart) is found however many entries of other shards were appended since.
local function logHolds(logKey, shardTag, entryId)
  local wanted = shardTag .. entryId
  local from, scanned = '+', 0
  while true do
    local batch = redis.call('XREVRANGE', logKey, from, '-', 'COUNT', SCAN_BATCH)
    for _, e in ipairs(batch) do
      scanned = scanned + 1
      local f = e[2]
      for j = 1, #f, 2 do
        if f[j] == 'e' then
          local origin = f[j + 1]
          if origin == wanted then return true end
          if scanned > DEDUPE_WINDOW and string.sub(origin, 1, #shardTag) == shardTag
            and streamIdLess(string.sub(origin, #shardTag + 1), entryId) then
            return false
          end
        end
      end
      from = '(' .. e[1]
    end
    if #batch < SCAN_BATCH then return false end
  end
end
