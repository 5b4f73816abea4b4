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

-- Runs the held writes in their order (the outcome is this request's own).
local function releaseWrites()
  local writes = heldWrites or {}
  heldWrites = nil
  for _, w in ipairs(writes) do redis.call(unpack(w)) end
end

-- Forgets the held writes (the outcome is an earlier request's, or a refusal).
local function dropWrites()
  if heldWrites then heldWrites = {} end
end
