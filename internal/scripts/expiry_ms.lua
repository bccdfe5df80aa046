-- expiry_ms.lua: idle_ms and held_ms (see common.lua) of a grantee, as
-- statement text inlined by the fast paths that grant (--@inline, see
-- assemble.go), where the helpers do not exist. The includer names ttl and
-- ld, the grantee's lease fields (strings; ld "0" without a lock delay);
-- idle is 2 * ttl, held 2 * ttl + ld, both strings, each number formatted
-- once: redis.call formats a number argument anew on every call
-- (docs/performance.md), and without a lock delay held is idle.
local idle = tostring(2 * ttl)
local held = idle
if ld ~= '0' then
  held = tostring(2 * ttl + ld)
end
