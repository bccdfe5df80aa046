-- election_reset.lua: force the leader out (operator action). The leader's
-- session is told its leadership was taken away; the first live candidate is
-- elected (not during a restart grace).
-- KEYS[1..3] see election_lib.lua
-- ARGV[1] prefix {ns}:   ARGV[2] "1" for sharded pub/sub   ARGV[3] election name
-- ARGV[4] observer channel {ns}:elw:<name>
-- Returns the hold id that was reset, or "" when nobody led.
--@include election_lib.lua
local p, k, q, c = ARGV[1], KEYS[1], KEYS[2], KEYS[3]
local cur = redis.call('HGET', k, 'hid')
redis.call('HDEL', k, 'hid', 'ld', 'free')
if cur and alive(p, cur) then
  revoke(p, ARGV[2], cur)
else
  cur = ''
end
el_handoff(p, k, q, c, ARGV[2], ARGV[3], ARGV[4])
return cur
