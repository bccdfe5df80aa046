-- election_proclaim.lua: change the leader's value, only for the leading hold id.
-- KEYS[1] {ns}:el:<name>
-- ARGV[1] prefix {ns}:   ARGV[2] hold id   ARGV[3] "1" for sharded pub/sub
-- ARGV[4] value   ARGV[5] observer channel
-- Returns 1 when done, 0 when the hold id does not lead (or its lease is gone).
--@include election_lib.lua
local p, hid, k = ARGV[1], ARGV[2], KEYS[1]
if redis.call('HGET', k, 'hid') ~= hid or not alive(p, hid) then
  return 0
end
redis.call('HSET', k, 'val', ARGV[4])
el_announce(ARGV[3], ARGV[5], tonumber(redis.call('HGET', k, 'tok')), hid, ARGV[4])
return 1
