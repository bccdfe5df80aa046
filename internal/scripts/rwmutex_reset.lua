-- rwmutex_reset.lua (with rwmutex_lib.lua): force-release a read-write
-- mutex (operator action): its writer or all its readers. Their sessions are
-- told the holds were taken away; the queue is served as by a release.
-- KEYS[1] {ns}:rw:<name>   KEYS[2] readers {ns}:rwr:<name>
-- KEYS[3] queue {ns}:q:rw:<name>
-- ARGV[1] "1" for sharded pub/sub
-- Returns the number of live holds taken away.
--@include rwmutex_lib.lua
local k, r, q, sharded = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local p = prefix_of(k)
local name = string.sub(k, #p + 4)
local n = 0
local w = redis.call('HGET', k, 'w')
if w and alive(p, w) then
  revoke(p, sharded, w)
  n = n + 1
end
for _, h in ipairs(redis.call('HKEYS', r)) do
  if alive(p, h) then
    revoke(p, sharded, h)
    n = n + 1
  end
end
redis.call('DEL', r)
redis.call('HDEL', k, 'w', 'wld', 'free', 'wfree')
rw_serve(p, k, r, q, sharded, name, nil)
rw_idle(p, k, r, q)
rw_mark(k, q, nil)
return n
