-- semaphore_release_batch.lua: the fast path of semaphore_release.lua
-- (sem_release_fast, semaphore_fast.lua) for several releases of one
-- session at once (see batch.go).
-- KEYS per release: meta and holders (semaphore_release.lua's KEYS[1..2];
-- the fast path reads the waiter mark, not the queue)
-- ARGV per release: the hold id and its permits (semaphore_release.lua's
-- ARGV[2] and ARGV[5])
-- Returns one reply per release, in order: REL_FREED, or R_SLOW for one
-- the fast path does not cover (not held, waiters to serve, a lock delay
-- running): the client then sends semaphore_release.lua for that one
-- alone. A release answered R_SLOW changed nothing.
--@include semaphore_fast.lua
local out = {}
for i = 1, #ARGV / 2 do
  out[i] = sem_release_fast(KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 * i - 1], ARGV[2 * i]) or R_SLOW
end
return out
