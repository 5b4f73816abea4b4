--[[
  One page of a replace of a user's allow list by the app's backend (docs/call-policy.md "The
  allow list"). Pages 0, 1, … of one replaceId gather into a staging set; the page marked `last`
  swaps it in with one RENAME, so the new list is seen whole or not at all. A page sent again is
  answered as the first time and changes nothing; so is any page of the replace last committed.
  A new replaceId drops a replace left unfinished.

  KEYS[1] policyKey   the user's policy hash; fields `replace` (the replaceId being gathered),
                      `replacePages` (pages gathered), `replaceSize` (ids gathered) and
                      `allowReplaceId` (the replace last committed)
  KEYS[2] allowKey    the allow list (set)
  KEYS[3] nextKey     the staging set, with a TTL renewed by every page

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  replaceId
  page          0-based page number
  userIds       JSON array of userIds
  last          '1' on the last page
  maxAllowed    the allow list's bound
  stagingTtlMs  how long an unfinished replace waits for its next page

  Returns
    { 'ok', state, size }   state 'gathering' (size: ids so far) or 'committed' (size: the list's)
    { 'error', 'page_out_of_order' | 'replace_expired' }  nothing was changed
    { 'error', 'too_many_allowed' }  the replace is dropped; the list in use stays
]]
local policyKey, allowKey, nextKey = KEYS[1], KEYS[2], KEYS[3]
--@arguments
local page, maxAllowed = tonumber(page), tonumber(maxAllowed)

local f = redis.call('HMGET', policyKey, 'replace', 'replacePages', 'replaceSize', 'allowReplaceId')
local current, pages, size = f[1], tonumber(f[2] or '0'), tonumber(f[3] or '0')
if f[4] == replaceId then return { 'ok', 'committed', redis.call('SCARD', allowKey) } end
if current ~= replaceId then
  if page ~= 0 then return { 'error', 'page_out_of_order' } end
  -- A new replace: whatever an unfinished one gathered goes.
  redis.call('DEL', nextKey)
  pages, size = 0, 0
elseif page < pages then
  return { 'ok', 'gathering', size }
elseif page > pages then
  return { 'error', 'page_out_of_order' }
elseif size > 0 and redis.call('EXISTS', nextKey) == 0 then
  -- Its staging set expired between two pages: the replace must start again.
  return { 'error', 'replace_expired' }
end

local ids = cjson.decode(userIds)
for i = 1, #ids, 1000 do redis.call('SADD', nextKey, unpack(ids, i, math.min(i + 999, #ids))) end
local n = redis.call('SCARD', nextKey)
if n > maxAllowed then
  -- The replace fails whole; the list in use stays.
  redis.call('DEL', nextKey)
  redis.call('HDEL', policyKey, 'replace', 'replacePages', 'replaceSize')
  return { 'error', 'too_many_allowed' }
end
if last ~= '1' then
  redis.call('PEXPIRE', nextKey, stagingTtlMs)
  redis.call('HSET', policyKey, 'replace', replaceId, 'replacePages', page + 1, 'replaceSize', n)
  return { 'ok', 'gathering', n }
end
if n > 0 then redis.call('RENAME', nextKey, allowKey); redis.call('PERSIST', allowKey) else redis.call('DEL', allowKey) end
redis.call('HDEL', policyKey, 'replace', 'replacePages', 'replaceSize')
redis.call('HSET', policyKey, 'allowReplaceId', replaceId)
return { 'ok', 'committed', n }
