--[[
  One live in-call signal (docs/signaling.md "Live signals"): checked and published in one round
  trip, never stored in a log. Only a member joined to the call, from its joined installation,
  may send; it reaches the other joined members' joined installations.

  KEYS[1] callKey
  KEYS[2] presenceKey  the call's presence map (lua/includes/presence.lua)
  KEYS[3] limitKey     the call's fixed-window signal counter (all senders together)
  KEYS[4] viewKey      the call's signal view: its members in the call, used while the head of
                       the call's record is unchanged (lua/includes/presence.lua signalSender)

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  userId
  installationId
  kind             muted | speaking | handRaised | video (state: kept in the presence map) or
                   reaction | custom (not kept)
  state            for a state kind, '1' or '0'; '' otherwise
  signalJson       the signal as delivered (a JSON object, already validated and bounded)
  noticeChannel    on a single Redis, the call shard's early channel, which every gateway
                   subscribes to: the signal is published there once, with its recipients
                   (src/gateway/signalNotice.ts). '' on a cluster, where each recipient's channel
                   lives in its user's slot: the gateway publishes to the recipients this returns.
  limit            signals per window on this call; 0: no limit
  windowMs         the limit's window
  presenceTtlMs    the presence map's lifetime after its last write
  viewTtlMs        the signal view's lifetime after it was made

  Returns
    { 'sent', count, recipients }  the number of recipients, and on a cluster the recipients
                                   as `userId\tinstallationId\t…` ('' on a single Redis:
                                   published here)
    { 'same' }                     a state kind's value as kept already: nothing sent
    { 'error', 'not_found' | 'not_joined' }
    { 'limited', retryAfterMs }    over the call's limit: nothing sent
]]
local callKey, presenceKey, limitKey, viewKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
--@arguments
--@include "callRecord"
--@include "fixedWindow"
--@include "presence"

local me = signalSender(callKey, viewKey, viewTtlMs, userId)
if not me then return { 'error', 'not_found' } end
if not me.joined or me.installationId ~= installationId then return { 'error', 'not_joined' } end

limit = tonumber(limit)
if limit > 0 then
  local rest = hitFixedWindow(limitKey, limit, tonumber(windowMs))
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

if noticeChannel == '' then return { 'sent', me.count, me.to } end
-- One publication for all recipients (src/gateway/signalNotice.ts has the layout).
if me.count > 0 then redis.call('SPUBLISH', noticeChannel, '!signals\n' .. me.to .. '\n' .. signalJson) end
return { 'sent', me.count, '' }
