-- The event log's epoch and last entry ID, creating the metadata when absent (a new user, or a
-- log that was lost: a new epoch makes older cursors report a `reset` gap).
local function logEpoch(metaKey, newEpoch, metaTtlMs)
  local epoch, last = unpack(redis.call('HMGET', metaKey, 'epoch', 'last'))
  if not epoch then
    epoch, last = newEpoch, '0-0'
    redis.call('HSET', metaKey, 'epoch', epoch, 'last', last)
    redis.call('PEXPIRE', metaKey, metaTtlMs)
  end
  return epoch, last
end
