--[[
  Changes a user's call policy (docs/call-policy.md): its mode, and users added to or removed from
  its block list, at once. Removing comes before adding; an entry already there stays as it is.

  KEYS[1] policyKey   the user's policy hash: `mode`, `blocked` (how many are blocked) and one
                      field `b:<userId>` per blocked user (value: when, ms)

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  mode          'everyone' | 'contacts' | 'nobody', or '' to leave it
  block         JSON array of userIds to block
  unblock       JSON array of userIds to unblock
  maxBlocked    the block list's bound (docs/call-policy.md "Limits")

  Returns
    { 'ok', blocked }                    blocked: how many users are blocked now
    { 'error', 'too_many_blocked' }      nothing was changed
]]
local policyKey = KEYS[1]
--@arguments
local maxBlocked = tonumber(maxBlocked)
local now = redis.call('TIME')
local nowMs = now[1] * 1000 + math.floor(now[2] / 1000)

local count = tonumber(redis.call('HGET', policyKey, 'blocked') or '0')
local removing, adding = cjson.decode(unblock), cjson.decode(block)
-- First count, so that a refused edit changes nothing.
local gone, seen = {}, {}
for _, u in ipairs(removing) do
  if not gone[u] and redis.call('HEXISTS', policyKey, 'b:' .. u) == 1 then gone[u] = true; count = count - 1 end
end
local new = {}
for _, u in ipairs(adding) do
  if not seen[u] and (gone[u] or redis.call('HEXISTS', policyKey, 'b:' .. u) == 0) then
    seen[u] = true
    new[#new + 1] = u
    count = count + 1
  end
end
if count > maxBlocked then return { 'error', 'too_many_blocked' } end
for u in pairs(gone) do redis.call('HDEL', policyKey, 'b:' .. u) end
for _, u in ipairs(new) do redis.call('HSET', policyKey, 'b:' .. u, nowMs) end
if mode ~= '' then redis.call('HSET', policyKey, 'mode', mode) end
redis.call('HSET', policyKey, 'blocked', count)
return { 'ok', count }
