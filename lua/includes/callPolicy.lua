-- Why the callee's call policy (docs/call-policy.md) keeps a call from `callerUserId` from
-- ringing: 'blocked' (the caller is on the block list, which always wins), 'notAllowed' (the
-- policy is `nobody`, or `contacts` and the caller is not on the allow list), or '' (it rings).
-- Reads KEYS[at] (the policy hash) with one HMGET, and KEYS[at + 1] (the allow list) only under
-- `contacts`: an empty policy costs one command (test/e2e/command-budgets.ts).
local function screenCall(at, callerUserId)
  local p = redis.call('HMGET', KEYS[at], 'mode', 'b:' .. callerUserId)
  if p[2] then return 'blocked' end
  if p[1] == 'nobody' then return 'notAllowed' end
  if p[1] == 'contacts' and redis.call('SISMEMBER', KEYS[at + 1], callerUserId) == 0 then return 'notAllowed' end
  return ''
end

-- Each invitee's verdict on `callerUserId` (a group create, an invite: docs/call-policy.md "Group
-- calls"): on a single Redis read from KEYS, two keys per invitee in `invitees`' order from
-- `policyAt`; on a cluster `screenedArg`, the JSON object of the verdicts read before the script
-- (lua/readCallPolicy.lua, those that are not ''). Returns userId -> 'blocked' | 'notAllowed'.
local function screenInvitees(invitees, policyAt, screenedArg, callerUserId)
  if policyAt == '' then return screenedArg == '' and {} or cjson.decode(screenedArg) end
  local out, at = {}, tonumber(policyAt)
  for n, u in ipairs(invitees) do
    local v = screenCall(at + 2 * (n - 1), callerUserId)
    if v ~= '' then out[u] = v end
  end
  return out
end
