--[[
  Reads one page of records kept as the members of a sorted set ordered by time, newest first: a
  user's call history (docs/call-history.md), the webhook dead letters (docs/webhooks.md "Dead
  letters"). Each member is a JSON object whose first field is its id (`{"<field>":"<id>"`), so
  members of the same millisecond are ordered by id.

  KEYS[1] indexKey     the sorted set (record JSON by ms), e.g. all calls or the missed ones

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  cursorMs     '' for the newest; else the score of the last record of the previous page
  cursorId     that record's id (records of the same millisecond come by id, descending)
  limit
  minMs        records older than this are past retention even if not yet removed

  Returns { more ('1' | ''), id1, ms1, json1, id2, ... }.
]]
local indexKey = KEYS[1]
--@arguments
local limit = tonumber(limit)

local function idOf(member)
  return string.match(member, '^{"[^"]+":"([^"]*)"') or ''
end

local maxScore = cursorMs == '' and '+inf' or cursorMs
local picked = {}
local offset = 0
-- One record more than asked tells whether more follow; records of the cursor's millisecond that
-- the previous page returned are skipped.
while #picked <= limit do
  local page = redis.call('ZRANGE', indexKey, maxScore, minMs, 'BYSCORE', 'REV', 'WITHSCORES', 'LIMIT', offset, limit + 1)
  if #page == 0 then break end
  for i = 1, #page, 2 do
    local member, score = page[i], page[i + 1]
    local id = idOf(member)
    if not (cursorMs ~= '' and score == cursorMs and id >= cursorId) then
      picked[#picked + 1] = { id, score, member }
      if #picked > limit then break end
    end
  end
  offset = offset + #page / 2
end
local more = #picked > limit
if more then picked[#picked] = nil end
local out = { more and '1' or '' }
for _, p in ipairs(picked) do
  out[#out + 1] = p[1]
  out[#out + 1] = p[2]
  out[#out + 1] = p[3]
end
return out
