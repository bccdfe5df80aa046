-- rwmutex_release_batch.lua: the fast path of rwmutex_release.lua for a
-- writer's release that leaves the mutex idle (rwmutex_release_idle.lua),
-- for several writers' releases of one session at once (see batch.go):
-- one call for all of them. Readers' releases go one call each (see
-- kind.go), as they check the readers left.
-- KEYS[1..n] the mutexes {ns}:rw:<name>, one per release
-- ARGV[1..n] the hold ids, all of one session's write holds
-- Returns one reply per release, in order: REL_FREED, or R_SLOW for a
-- release the fast path does not cover (not held by that hold id,
-- waiters to serve, a lock delay): the client then sends
-- rwmutex_release.lua for that one alone. A release answered R_SLOW
-- changed nothing.
local out = {}
for i = 1, #ARGV do
  local k, hid, shared = KEYS[i], ARGV[i], false
  local st = redis.call('HMGET', k, 'w', 'q', 'i', 'free', 'wfree')
  local reply
  --@inline rwmutex_release_idle.lua return=reply
  out[i] = reply or R_SLOW
end
return out
