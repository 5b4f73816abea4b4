-- A user's push registrations expire when none of them was written for the idle window
-- (PUSH_REGISTRATION_IDLE_DAYS, docs/keyspace.md "Push registrations"): every write moves the
-- hash's expiry to `expireAtMs`. Returns the field and tokenHash of every registration in it, so
-- the caller moves their token owner keys to the same instant (those keys live in other slots,
-- out of a script's reach on a cluster).
local function keepRegistrationsUntil(registrationsKey, expireAtMs)
  redis.call('PEXPIREAT', registrationsKey, expireAtMs)
  local stored = redis.call('HGETALL', registrationsKey)
  local out = {}
  for i = 1, #stored, 2 do
    local ok, r = pcall(cjson.decode, stored[i + 1])
    if ok and type(r) == 'table' and type(r.tokenHash) == 'string' then
      out[#out + 1] = stored[i]
      out[#out + 1] = r.tokenHash
    end
  end
  return out
end
