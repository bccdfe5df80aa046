-- semaphore_reset.lua (with semaphore_lib.lua): force-release every permit
-- of a semaphore (operator action). The live holders' sessions are told
-- their holds were taken away; the lock delays of lost holders end; the
-- queue is then served as after a release.
-- KEYS[1] meta   KEYS[2] holders   KEYS[3] queue (see semaphore_lib.lua)
-- ARGV[1] prefix {ns}:   ARGV[2] "1" for sharded pub/sub   ARGV[3] name
-- Returns the number of live holds taken away. With no holder recorded and
-- no lock delay running it changes nothing.
--@include semaphore_lib.lua
local p, meta, holders, q = ARGV[1], KEYS[1], KEYS[2], KEYS[3]
local hids = redis.call('HKEYS', holders)
if #hids == 0 and not redis.call('HGET', meta, 'delay') then
  return 0
end
local n = 0
for _, hid in ipairs(hids) do
  if alive(p, hid) then
    revoke(p, ARGV[2], hid)
    n = n + 1
  end
end
redis.call('DEL', holders)
if redis.call('EXISTS', meta) == 1 then
  redis.call('HSET', meta, 'used', '0')
  redis.call('HDEL', meta, 'delay')
end
sem_serve(p, meta, holders, q, ARGV[2], ARGV[3])
sem_idle(meta, holders, q)
return n
