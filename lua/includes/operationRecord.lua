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
