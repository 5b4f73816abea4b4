--[[
  Reads one user's event log after a cursor (an epoch plus an entry ID).

  KEYS[1] logKey
  KEYS[2] metaKey       hash: epoch, last, trimmed (see appendEvents.lua)

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  cursorEpoch   '' when the client has no cursor (start at the head, no history)
  cursorId      entry ID the client has seen up to
  limit         maximum number of entries returned
  newEpoch      the epoch to create when the log has none yet
  metaTtlMs

  Returns
    { 'head', epoch, lastId }                 no cursor given
    { 'gap', 'reset' | 'trimmed', epoch, lastId }
    { 'events', epoch, lastId, entries }      entries as XRANGE returns them (may be empty)
]]
local logKey, metaKey = KEYS[1], KEYS[2]
--@arguments
local limit, metaTtlMs = tonumber(limit), tonumber(metaTtlMs)

--@include "logEpoch"
--@include "streamIds"

local epoch, last = logEpoch(metaKey, newEpoch, metaTtlMs)
if cursorEpoch == '' then return { 'head', epoch, last } end
-- Another epoch, or an ID this log never reached: the log was reset since the cursor was issued.
if cursorEpoch ~= epoch or streamIdLess(last, cursorId) then return { 'gap', 'reset', epoch, last } end

if redis.call('EXISTS', logKey) == 0 then
  -- Everything aged out: a gap unless the cursor was already at the end.
  if streamIdLess(cursorId, last) then return { 'gap', 'trimmed', epoch, last } end
  return { 'events', epoch, last, {} }
end

-- Entries are only ever removed by trimming (appendEvents.lua records the newest one removed), so
-- a removed entry after the cursor is a gap.
local trimmed = redis.call('HGET', metaKey, 'trimmed')
if trimmed and streamIdLess(cursorId, trimmed) then return { 'gap', 'trimmed', epoch, last } end

-- A cursor names an entry this log held ('0-0' for none yet, or the newest entry trimmed). Read
-- from that entry itself: when it is missing though nothing trimmed it, the log lost writes the
-- device had already seen. A failover to a replica that had not received them keeps the epoch,
-- and the log grows again past the cursor; continuing after it would hand on new events as if the
-- lost ones (a call's revision, which the call may now reuse) still held: a reset instead
-- (docs/signaling.md "The epoch, proven").
local entries = redis.call('XRANGE', logKey, cursorId, '+', 'COUNT', limit + 1)
if entries[1] and entries[1][1] == cursorId then
  table.remove(entries, 1)
elseif cursorId ~= '0-0' and cursorId ~= trimmed then
  return { 'gap', 'reset', epoch, last }
end
if #entries > limit then entries[#entries] = nil end
return { 'events', epoch, last, entries }
