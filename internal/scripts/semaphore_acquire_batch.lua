-- semaphore_acquire_batch.lua: the fast path of semaphore_acquire.lua
-- (sem_acquire_fast, semaphore_fast.lua) for several acquire attempts of
-- one session at once (see batch.go): one call and one read of the
-- caller's lease for all of them.
-- KEYS[1] the caller's lease {ns}:s:<sid>, then per attempt meta and
-- holders (semaphore_acquire.lua's KEYS[1..2]; the fast path reads the
-- waiter mark, not the queue)
-- ARGV per attempt: hold id, n, the caller's limit (semaphore_acquire.lua's
-- ARGV[2], ARGV[6], ARGV[7])
-- Returns one reply per attempt, in order: the fast path's grant, or
-- {R_SLOW} for an attempt it does not cover (no lease with g = "0", a
-- withdrawn hold id, or anything sem_acquire_fast leaves to the full
-- path): the client then sends semaphore_acquire.lua for that one alone.
-- An attempt answered {R_SLOW} changed nothing.
--@include semaphore_fast.lua
local n = #ARGV / 3
local fields = {'g', 'ttl', 'ld'}
for i = 1, n do
  fields[i + 3] = 'x:' .. ARGV[3 * i - 2]
end
local lease = redis.call('HMGET', KEYS[1], unpack(fields))
local out = {}
for i = 1, n do
  local r
  if lease[1] == '0' and not lease[i + 3] then
    r = sem_acquire_fast(KEYS[2 * i], KEYS[2 * i + 1], ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i],
      lease[2], lease[3])
  end
  out[i] = r or {R_SLOW}
end
return out
