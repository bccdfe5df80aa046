-- pool_reset.lua (with pool_lib.lua): force-release every held member of a
-- pool (operator action). The live holders' sessions are told their holds
-- were taken away; every held member, a lost holder's in its lock delay
-- too, goes back to the free set as by a release; the queue is then served.
-- KEYS as in pool_acquire.lua.
-- ARGV[1] prefix {ns}:   ARGV[2] "1" for sharded pub/sub   ARGV[3] pool name
-- ARGV[4] base "{ns}:pool:<name>:"
-- Returns the number of live holds taken away. With no member held it
-- changes nothing.
--@include pool_core.lua
--@helpers
--@include pool_lib.lua
local p, q, b = ARGV[1], KEYS[1], ARGV[4]
local held = redis.call('HGETALL', b .. 'h')
if #held == 0 then
  return 0
end
local n = 0
for i = 1, #held, 2 do
  local k, h = held[i], held[i + 1]
  pool_unhold(b, k, h)
  if alive(p, h) then
    revoke(p, ARGV[2], h)
    n = n + 1
  end
  pool_mark_free(b, k)
end
redis.call('DEL', b .. 'd')
pool_serve(p, b, q, ARGV[2], ARGV[3])
return n
