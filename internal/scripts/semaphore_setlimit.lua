-- semaphore_setlimit.lua: an operator sets the limit, or clears the mark that
-- an operator set it. A set limit overrides the limit every caller passes
-- and does not expire while idle; a cleared one is again the first caller's,
-- kept while the semaphore is in use. Current holders keep their permits (a
-- smaller limit only makes new grants wait); waiters that now fit are served.
-- KEYS[1] meta   KEYS[2] holders   KEYS[3] queue (see semaphore_lib.lua)
-- ARGV[1] prefix {ns}:   ARGV[2] "1" for sharded pub/sub   ARGV[3] name
-- ARGV[4] limit, or "0" to clear   ARGV[5] idle expiry ms, used when no grant recorded one
-- Returns the previous limit, or 0 when none was stored.
--@include semaphore_lib.lua
local prev = tonumber(redis.call('HGET', KEYS[1], 'limit') or '0')
if ARGV[4] == '0' then
  if prev == 0 then
    return 0
  end
  redis.call('HDEL', KEYS[1], 'set')
  -- meta had no expiry while set: from now on it lives as long as the
  -- holders and waiters keep their keys (their heartbeats keep meta too),
  -- and a running lock delay, and expires once idle (sem_idle below).
  local _, _, last = sem_delays(redis.call('HGET', KEYS[1], 'delay'))
  local t = math.max(redis.call('PTTL', KEYS[2]), redis.call('PTTL', KEYS[3]), last > 0 and last - now_ms() or 0)
  if t > 0 then
    keep_at_least(KEYS[1], t)
  end
else
  redis.call('HSET', KEYS[1], 'limit', ARGV[4], 'set', '1')
  redis.call('PERSIST', KEYS[1])
end
if not redis.call('HGET', KEYS[1], 'i') then
  redis.call('HSET', KEYS[1], 'i', ARGV[5])
end
sem_serve(ARGV[1], KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3])
sem_idle(KEYS[1], KEYS[2], KEYS[3])
return prev
