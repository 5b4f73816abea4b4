--[[
  The live in-call signals one gateway received in one turn of its event loop (docs/signaling.md
  "Live signals"), checked and published in one round trip, never stored in a log. Only a member
  joined to the call, from its joined installation, may send; a signal reaches the other joined
  members' joined installations. Each signal is checked, counted and kept in turn, in the order
  given: a sender's signals stay in order.

  KEYS, four per call (src/gateway/signals.ts signalsScriptCall), the call's `n`th four at 4n-3:
    callKey
    presenceKey  the call's presence map (lua/includes/presence.lua)
    limitKey     the call's fixed-window signal counter (all senders together)
    viewKey      the call's signal view: its members in the call, used while the head of the
                 call's record is unchanged (lua/includes/presence.lua signalSender)
  On a cluster every call of one script shares a slot: the gateway groups signals by call shard.

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  noticeChannel    on a single Redis, an early channel, which every gateway subscribes to: the
                   signals are published there, once for all their recipients, in one message
                   (src/gateway/signalNotice.ts). '' on a cluster, where each recipient's channel
                   lives in its user's slot: the gateway publishes to the recipients this returns.
  limit            signals per window on each call; 0: no limit
  windowMs         the limit's window
  presenceTtlMs    the presence map's lifetime after its last write
  viewTtlMs        the signal view's lifetime after it was made
  then the rest, `signals`, six strings a signal:
    call           n: the signal's call is the nth four keys
    userId, installationId   the sender
    kind           muted | speaking | handRaised | video (state: kept in the presence map) or
                   reaction | custom (not kept)
    state          for a state kind, '1' or '0'; '' otherwise
    signalJson     the signal as delivered (a JSON object without a line break, already
                   validated and bounded)

  Returns, per signal in order, one of
    { 'sent', count, recipients }  the number of recipients, and on a cluster the recipients
                                   as `userId\tinstallationId\t…` ('' on a single Redis:
                                   published here)
    { 'same' }                     a state kind's value as kept already: nothing sent
    { 'error', 'not_found' | 'not_joined' }
    { 'limited', retryAfterMs }    over the call's limit: nothing sent
]]
--@arguments
--@include "fixedWindow"
--@include "presence"

limit = tonumber(limit)
windowMs = tonumber(windowMs)

-- The sender of each call and user, looked up once a script: nothing here changes who is in a call.
local senders = {}

local function one(at)
  local n = tonumber(ARGV[at])
  local userId, installationId, kind, state = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
  local callKey, presenceKey, limitKey, viewKey = KEYS[4 * n - 3], KEYS[4 * n - 2], KEYS[4 * n - 1], KEYS[4 * n]
  local id = n .. '\n' .. userId
  local me = senders[id]
  if me == nil then
    me = signalSender(callKey, viewKey, viewTtlMs, userId) or false
    senders[id] = me
  end
  if not me then return { 'error', 'not_found' } end
  if not me.joined or me.installationId ~= installationId then return { 'error', 'not_joined' } end

  if limit > 0 then
    local rest = hitFixedWindow(limitKey, limit, windowMs)
    if rest > 0 then return { 'limited', rest } end
  end

  if state ~= '' then
    local entry = keptPresence(presenceKey, me) or { stay = presenceStay(me) }
    local value = state == '1'
    if entry[kind] == value then return { 'same' } end
    entry[kind] = value
    redis.call('HSET', presenceKey, userId, cjson.encode(entry))
    redis.call('PEXPIRE', presenceKey, presenceTtlMs)
  end
  return { 'sent', me.count, me.to }
end

local out, notice = {}, {}
for at = signalsFrom, #ARGV, 6 do
  local reply = one(at)
  if reply[1] == 'sent' and noticeChannel ~= '' then
    if reply[2] > 0 then
      notice[#notice + 1] = reply[3]
      notice[#notice + 1] = ARGV[at + 5]
    end
    reply[3] = ''
  end
  out[#out + 1] = reply
end

-- One publication for all the turn's signals (src/gateway/signalNotice.ts has the layout): one
-- signal in the form a gateway of the previous version also reads.
if #notice > 0 then
  redis.call('SPUBLISH', noticeChannel, (#notice == 2 and '!signals\n' or '!signalbatch\n') .. table.concat(notice, '\n'))
end
return out
