-- Why the callee's call policy (docs/call-policy.md) keeps a call from `callerUserId` from
-- ringing: 'blocked' (the caller is on the block list, which always wins), 'notAllowed' (the
-- policy is `nobody`, or `contacts` and the caller is not on the allow list), 'silenced' or
-- 'doNotDisturb' (do not disturb is on at `nowMs`, the caller is not a favourite, and its action
-- is `silence` or `reject`), or '' (it rings). Reads KEYS[at] (the policy hash) with one HMGET,
-- and KEYS[at + 1] (the allow list) only under `contacts`: an empty policy costs one command
-- (test/e2e/command-budgets.ts).
local function screenCall(at, callerUserId, nowMs)
  local p = redis.call('HMGET', KEYS[at], 'mode', 'b:' .. callerUserId, 'dndUntil', 'dndAction', 'f:' .. callerUserId)
  if p[2] then return 'blocked' end
  if p[1] == 'nobody' then return 'notAllowed' end
  if p[1] == 'contacts' and redis.call('SISMEMBER', KEYS[at + 1], callerUserId) == 0 then return 'notAllowed' end
  -- dndUntil: '0' until it is turned off, else the time (ms) it ends by itself.
  if p[3] and not p[5] then
    local untilMs = tonumber(p[3])
    if untilMs == 0 or nowMs < untilMs then return p[4] == 'reject' and 'doNotDisturb' or 'silenced' end
  end
  return ''
end

-- Whether the caller is shown a screened call as busy (born ended `busy`) rather than as one that
-- rings out: do not disturb's `reject` always, its `silence` never (the caller hears it ring
-- out), a block or `notAllowed` as SCREENED_CALL_REPLY says (`screenedReply`).
local function screenedAsBusy(verdict, screenedReply)
  if verdict == 'doNotDisturb' then return true end
  if verdict == '' or verdict == nil or verdict == 'silenced' then return false end
  return screenedReply == 'busy'
end

-- Each invitee's verdict on `callerUserId` (a group create, an invite: docs/call-policy.md "Group
-- calls"): on a single Redis read from KEYS, two keys per invitee in `invitees`' order from
-- `policyAt`; on a cluster `screenedArg`, the JSON object of the verdicts read before the script
-- (lua/readCallPolicy.lua, those that are not ''). Returns userId -> verdict (screenCall).
local function screenInvitees(invitees, policyAt, screenedArg, callerUserId, nowMs)
  if policyAt == '' then return screenedArg == '' and {} or cjson.decode(screenedArg) end
  local out, at = {}, tonumber(policyAt)
  for n, u in ipairs(invitees) do
    local v = screenCall(at + 2 * (n - 1), callerUserId, nowMs)
    if v ~= '' then out[u] = v end
  end
  return out
end
