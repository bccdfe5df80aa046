-- pool_release_batch.lua: the fast path of pool_release.lua
-- (pool_release_fast.lua) for several releases of one session
-- at once (see batch.go).
-- KEYS per release: its pool's queue {ns}:q:pool:<name>
-- ARGV per release: hold id, base "{ns}:pool:<name>:"
-- Returns one reply per release, in order: REL_FREED, or R_SLOW for one
-- the fast path does not cover (not held, waiters to serve): the client
-- then sends pool_release.lua for that one alone. A release answered
-- R_SLOW changed nothing.
--@include pool_release_fast.lua
local out = {}
for i = 1, #KEYS do
  out[i] = pool_release_fast(KEYS[i], ARGV[2 * i], ARGV[2 * i - 1]) or R_SLOW
end
return out
