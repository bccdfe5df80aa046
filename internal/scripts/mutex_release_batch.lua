-- mutex_release_batch.lua: the fast paths of mutex_release.lua for several
-- releases of one session at once (see batch.go): one call, and at most
-- one TIME for all of them.
-- The fast paths are mutex_release_fast.lua, as in mutex_release.lua.
-- KEYS[1..n] the mutexes {ns}:m:<name>, one per release
-- ARGV[1] "<sharded>": "1" for sharded pub/sub   ARGV[2..n+1] the hold ids,
-- all of one session
-- Returns one reply per release, in order: REL_FREED when released (and
-- handed to the first live waiter, if any), or R_SLOW for a release the
-- fast paths do not cover (not held by that hold id, a lock delay, a dead
-- first waiter ...): the client then sends mutex_release.lua for that one
-- alone. A release answered R_SLOW changed nothing.
local n = #ARGV - 1
local out = {}
local p
local sh = ARGV[1]
for i = 1, n do
  local hid, m = ARGV[i + 1], KEYS[i]
  local r
  --@inline mutex_release_fast.lua return=r
  out[i] = r or R_SLOW
end
return out
