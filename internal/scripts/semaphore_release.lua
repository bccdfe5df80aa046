-- semaphore_release.lua: return the permits of a hold id, or withdraw it from
-- the queue; then serve the waiters that now fit.
-- KEYS[1] meta   KEYS[2] holders   KEYS[3] queue (see semaphore_lib.lua)
-- ARGV[1] prefix {ns}:   ARGV[2] hold id   ARGV[3] "1" for sharded pub/sub
-- ARGV[4] name   ARGV[5] n requested   ARGV[6] "1" to withdraw the hold id
-- for good (see withdraw in common.lua)
-- Returns 1 when it was held and is released, 2 when it was only queued, 0
-- when neither: idempotent.
--@include semaphore_fast.lua
local p, hid, meta, holders, q = ARGV[1], ARGV[2], KEYS[1], KEYS[2], KEYS[3]

-- Fast path, before the helpers exist (see scripts.go): see
-- sem_release_fast in semaphore_fast.lua.
if ARGV[6] ~= '1' then
  local r = sem_release_fast(meta, holders, hid, ARGV[5])
  if r then
    return r
  end
end

--@helpers
--@include semaphore_lib.lua
if ARGV[6] == '1' then
  withdraw(p, hid)
end
local v = redis.call('HGET', holders, hid)
if v then
  redis.call('HDEL', holders, hid)
  redis.call('HINCRBY', meta, 'used', -tonumber(string.match(v, '^(%d+)')))
  sem_serve(p, meta, holders, q, ARGV[3], ARGV[4])
  sem_idle(meta, holders, q)
  return REL_FREED
end
if redis.call('LREM', q, '0', hid .. '#' .. ARGV[5]) > 0 then
  sem_serve(p, meta, holders, q, ARGV[3], ARGV[4])
  sem_idle(meta, holders, q)
  return REL_DEQUEUED
end
return REL_NOT_FOUND
