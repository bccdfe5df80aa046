-- semaphore_setlimit.lua: change the stored limit; current holders keep their
-- permits (a smaller limit only makes new grants wait), waiters that now fit
-- are served.
-- KEYS[1] meta   KEYS[2] holders   KEYS[3] queue (see semaphore_lib.lua)
-- ARGV[1] prefix {ns}:   ARGV[2] "1" for sharded pub/sub   ARGV[3] name   ARGV[4] limit
-- Returns the previous limit, or 0 when none was stored.
local prev = tonumber(redis.call('HGET', KEYS[1], 'limit') or '0')
redis.call('HSET', KEYS[1], 'limit', ARGV[4])
sem_serve(ARGV[1], KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3])
sem_idle(KEYS[1], KEYS[2], KEYS[3])
return prev
