--[[
  On a Redis Cluster, a callee's verdict on one caller (lua/includes/callPolicy.lua), read in the
  same round trip as the create's operation binding, before its script: the policy keys live in
  the callee's slot, apart from the call's (docs/call-policy.md "Where it is enforced"). On a
  single Redis the create's own script reads them.

  KEYS[1] policyKey   the callee's policy hash
  KEYS[2] allowKey    the callee's allow list (set)

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  callerUserId

  Returns 'blocked', 'notAllowed', 'silenced', 'doNotDisturb' or '' (rings).
]]
--@arguments
--@include "callPolicy"
--@include "nowMs"
return screenCall(1, callerUserId, nowMs())
