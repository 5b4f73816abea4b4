-- Idempotency records: the outcome of one operation (code, HTTP status, call fields at that time),
-- stored under the operation key with the request fingerprint. A replay returns it unchanged.

-- Returns nil when no record exists, the reply to send when it does, or an error reply when the
-- same operation key was used with a different fingerprint. `mayExist` is false when the caller
-- just bound the operationId for the first time (no record can exist then): nothing is read.
local function replayOperation(opKey, fingerprint, mayExist)
  if not mayExist then return nil end
  local raw = redis.call('GET', opKey)
  if not raw then return nil end
  local rec = cjson.decode(raw)
  if rec.fp ~= fingerprint then return { 'error', 'idempotency_conflict' } end
  return { 'replay', rec.code, rec.status, rec.fields }
end

local function recordOperation(opKey, fingerprint, code, status, fields, ttlMs)
  redis.call('SET', opKey, cjson.encode({ fp = fingerprint, code = code, status = status, fields = fields }), 'PX', ttlMs)
  return { 'fresh', code, status, fields }
end

-- The outcome of a request that changes nothing (a conflict, an echo, a repeat). When the script
-- skipped the record read at its opening (`skippedRead`: this request's operationId binding was
-- new), a concurrent replay of the same request may still have run first and recorded its
-- outcome; that record is then the answer, so the two requests get one outcome. Only a request
-- that changes the call may skip the read for good: a recorded replay always leaves the call where
-- this request can no longer change it.
local function recordUnchanged(opKey, fingerprint, code, status, fields, ttlMs, skippedRead)
  local replay = replayOperation(opKey, fingerprint, skippedRead)
  if replay then return replay end
  return recordOperation(opKey, fingerprint, code, status, fields, ttlMs)
end
