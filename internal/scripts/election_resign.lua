-- election_resign.lua: give up leadership held by a hold id (the next live
-- candidate becomes leader), or withdraw its candidacy.
-- KEYS[1..3] see election_lib.lua
-- ARGV[1] prefix {ns}:   ARGV[2] hold id   ARGV[3] "1" for sharded pub/sub
-- ARGV[4] election name   ARGV[5] observer channel   ARGV[6] "1" to withdraw
-- the hold id for good (see withdraw in common.lua)
-- Returns 1 when it led and resigned, 2 when it was only a candidate, 0 when
-- neither: idempotent.
--@include election_lib.lua
local p, hid, k, q, c = ARGV[1], ARGV[2], KEYS[1], KEYS[2], KEYS[3]
if ARGV[6] == '1' then
  withdraw(p, hid)
end
if redis.call('HGET', k, 'hid') == hid then
  redis.call('HDEL', k, 'hid', 'ld')
  el_handoff(p, k, q, c, ARGV[3], ARGV[4], ARGV[5])
  return REL_FREED
end
redis.call('HDEL', c, hid)
if redis.call('LREM', q, '0', hid) > 0 then
  single_idle(k, q)
  return REL_DEQUEUED
end
return REL_NOT_FOUND
