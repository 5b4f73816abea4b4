--[[
  Reads one page of records kept as a hash (id -> JSON) and a sorted set that orders the ids by
  time, newest first: a user's call history (docs/call-history.md), the webhook dead letters
  (docs/webhooks.md "Dead letters").

  KEYS[1] indexKey     the order to read (sorted set: id by ms), e.g. all calls or the missed ones
  KEYS[2] recordsKey   the records (hash: id -> JSON)

  ARGV[1] cursorMs     '' for the newest; else the score of the last record of the previous page
  ARGV[2] cursorId     that record's id (records of the same millisecond are ordered by id,
                       descending)
  ARGV[3] limit
  ARGV[4] maxAgeMs     records older than this are past retention even if not yet removed

  Returns { more ('1' | ''), id1, ms1, json1, id2, ... }.
]]
local indexKey, recordsKey = KEYS[1], KEYS[2]
local cursorMs, cursorId, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])

--@include "nowMs"
--@include "fmtInt"

local minScore = fmtInt(nowMs() - tonumber(ARGV[4]))
local maxScore = cursorMs == '' and '+inf' or cursorMs
local picked = {}
local offset = 0
-- One page more than asked tells whether more follow; records of the cursor's millisecond that
-- the previous page returned are skipped.
while #picked <= limit do
  local page = redis.call('ZRANGE', indexKey, maxScore, minScore, 'BYSCORE', 'REV', 'WITHSCORES', 'LIMIT', offset, limit + 1)
  if #page == 0 then break end
  for i = 1, #page, 2 do
    local id, score = page[i], page[i + 1]
    if not (cursorMs ~= '' and score == cursorMs and id >= cursorId) then
      picked[#picked + 1] = { id, score }
      if #picked > limit then break end
    end
  end
  offset = offset + #page / 2
end
local more = #picked > limit
if more then picked[#picked] = nil end
local out = { more and '1' or '' }
if #picked == 0 then return out end
local ids = {}
for i, p in ipairs(picked) do ids[i] = p[1] end
local records = redis.call('HMGET', recordsKey, unpack(ids))
for i, p in ipairs(picked) do
  if records[i] then
    out[#out + 1] = p[1]
    out[#out + 1] = p[2]
    out[#out + 1] = records[i]
  end
end
return out
