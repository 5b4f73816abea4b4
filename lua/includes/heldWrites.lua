-- The writes of a request script, held until its outcome is known (lua/includes/operationRecord.lua
-- openOperation). On a single Redis a request's binding and record are one SET … NX GET made at
-- its end: a request that finds its operationId bound already must change nothing, so until then
-- its writes wait here and it reads the call from its Lua table (lua/includes/callRecord.lua),
-- never a key it wrote. Scripts that hold nothing (the sweeps, the relay, a cluster's requests)
-- write at once.
local heldWrites = nil

local function write(...)
  if heldWrites then
    heldWrites[#heldWrites + 1] = { ... }
  else
    redis.call(...)
  end
end

local function holdWrites()
  heldWrites = {}
end

-- A write the request's other writes depend on (a create's SET … NX of its new call): held, it
-- is run in its place, and when it writes nothing the writes after it never run and the request
-- gets `refusal` instead (releaseWrites). Written at once, its reply is the script's to check.
local function guardedWrite(refusal, ...)
  if heldWrites then
    heldWrites[#heldWrites + 1] = { refusal = refusal, ... }
  else
    redis.call(...)
  end
end

-- Runs the held writes in their order (the outcome is this request's own). Returns nil, or the
-- refusal of a guarded write that wrote nothing (then the writes after it did not run).
local function releaseWrites()
  local writes = heldWrites or {}
  heldWrites = nil
  for _, w in ipairs(writes) do
    if not redis.call(unpack(w)) and w.refusal then return w.refusal end
  end
  return nil
end

-- Forgets the held writes (the outcome is an earlier request's, or a refusal).
local function dropWrites()
  if heldWrites then heldWrites = {} end
end
