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
