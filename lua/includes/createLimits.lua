-- A create's rate limits on a single Redis (src/commands/create.ts, docs/api.md "Abuse limits"):
-- the caller's creates and each invitee's invitations, hit by the create's own script as its
-- first step, so they cost no script call of their own. On a cluster their counters live in
-- other slots and are hit apart, before the script (src/calls/store.ts), which gets none.
--   KEYS[firstKey..]  the counters, in `rulesArg`'s order
--   rulesArg          JSON [[limit, windowMs, inviteeUserId?], ...], one per counter; '' for none
--   screened          userId -> verdict of the invitees the call policy screened: their counters
--                     are not hit (a blocked caller must not use up its victim's invitations)
-- Every counter is hit, even after one refuses (as the separate calls hit them all). The hits are
-- made at once with redis.call, not held (lua/includes/heldWrites.lua): every create counts, a
-- replay too. Returns nil when every limit allows the create, else the reply to send at once,
-- before the script does anything else: { 'limited', n, retryAfterMs } for the first counter that
-- refused (n from 1).
--@include "fixedWindow"
local function hitCreateLimits(firstKey, rulesArg, screened)
  if rulesArg == '' then return nil end
  local refused = nil
  for n, rule in ipairs(cjson.decode(rulesArg)) do
    if not (rule[3] and screened[rule[3]]) then
      local retryAfterMs = hitFixedWindowOpening(KEYS[firstKey + n - 1], rule[1], rule[2])
      if retryAfterMs > 0 and not refused then refused = { 'limited', n, retryAfterMs } end
    end
  end
  return refused
end
