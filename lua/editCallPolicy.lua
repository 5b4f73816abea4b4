--[[
  Changes a user's call policy (docs/call-policy.md): its mode, do not disturb, and users added to
  or removed from its block list and its favourites, at once. Removing comes before adding; an
  entry already there stays as it is. A list over its bound changes nothing at all.

  KEYS[1] policyKey   the user's policy hash: `mode`, `blocked` (how many are blocked), one field
                      `b:<userId>` per blocked user (value: when, ms), `dndUntil` ('0': on until
                      turned off; else when it ends, ms; absent: off), `dndAction` ('silence' |
                      'reject'), `favourites` (how many) and one field `f:<userId>` per favourite

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  mode           'everyone' | 'contacts' | 'nobody', or '' to leave it
  block          JSON array of userIds to block
  unblock        JSON array of userIds to unblock
  maxBlocked     the block list's bound (docs/call-policy.md "Limits")
  dndUntil       '' to leave do not disturb as it is, 'off', '0' (on until turned off) or when it ends (ms)
  dndAction      'silence' | 'reject', or '' to leave it
  favourite      JSON array of userIds whose calls ring through do not disturb
  unfavourite    JSON array of userIds to take off the favourites
  maxFavourites  the favourites' bound

  Returns
    { 'ok', blocked, favourites }                          how many each list holds now
    { 'error', 'too_many_blocked' | 'too_many_favourites' } nothing was changed
]]
local policyKey = KEYS[1]
--@arguments
local now = redis.call('TIME')
local nowMs = now[1] * 1000 + math.floor(now[2] / 1000)

-- A list's edit, counted first so that a refused edit changes nothing: the fields to delete and
-- to add, and the list's size after.
local function planList(prefix, countField, removingJson, addingJson)
  local count = tonumber(redis.call('HGET', policyKey, countField) or '0')
  local gone, seen, new = {}, {}, {}
  for _, u in ipairs(cjson.decode(removingJson)) do
    if not gone[u] and redis.call('HEXISTS', policyKey, prefix .. u) == 1 then gone[u] = true; count = count - 1 end
  end
  for _, u in ipairs(cjson.decode(addingJson)) do
    if not seen[u] and (gone[u] or redis.call('HEXISTS', policyKey, prefix .. u) == 0) then
      seen[u] = true
      new[#new + 1] = u
      count = count + 1
    end
  end
  return { prefix = prefix, countField = countField, gone = gone, new = new, count = count }
end

local function applyList(plan)
  for u in pairs(plan.gone) do redis.call('HDEL', policyKey, plan.prefix .. u) end
  for _, u in ipairs(plan.new) do redis.call('HSET', policyKey, plan.prefix .. u, nowMs) end
  redis.call('HSET', policyKey, plan.countField, plan.count)
end

local blocked = planList('b:', 'blocked', unblock, block)
if blocked.count > tonumber(maxBlocked) then return { 'error', 'too_many_blocked' } end
local favourites = planList('f:', 'favourites', unfavourite, favourite)
if favourites.count > tonumber(maxFavourites) then return { 'error', 'too_many_favourites' } end
applyList(blocked)
applyList(favourites)
if mode ~= '' then redis.call('HSET', policyKey, 'mode', mode) end
if dndUntil == 'off' then
  redis.call('HDEL', policyKey, 'dndUntil')
elseif dndUntil ~= '' then
  redis.call('HSET', policyKey, 'dndUntil', dndUntil)
end
if dndAction ~= '' then redis.call('HSET', policyKey, 'dndAction', dndAction) end
return { 'ok', blocked.count, favourites.count }
