-- mutex_release.lua: release the mutex held by a hold id, or withdraw that hold
-- id from the waiter queue. Releasing hands the mutex to the first live waiter.
-- KEYS[1] mutex {ns}:m:<name>   KEYS[2] queue {ns}:q:m:<name>
-- ARGV[1] prefix {ns}:   ARGV[2] hold id   ARGV[3] "1" for sharded pub/sub
-- ARGV[4] mutex name   ARGV[5] "1" to withdraw the hold id for good (see
-- withdraw in common.lua)
-- Returns 1 when it was held and is released, 2 when it was only queued, 0
-- when it is neither (already released, or taken away): idempotent.
local p, hid, m, q = ARGV[1], ARGV[2], KEYS[1], KEYS[2]

-- Fast path, before the helpers exist (see scripts.go): a plain release
-- with nobody waiting.
local released = false
if ARGV[5] ~= '1' and redis.call('HGET', m, 'hid') == hid then
  redis.call('HDEL', m, 'hid') -- 'ld' only matters while 'hid' is set
  if redis.call('LLEN', q) == 0 then
    return 1
  end
  released = true
end

--@helpers
if released then
  single_handoff(p, m, q, ARGV[3], ARGV[4])
  return 1
end
if ARGV[5] == '1' then
  withdraw(p, hid)
end
if redis.call('HGET', m, 'hid') == hid then
  redis.call('HDEL', m, 'hid')
  single_handoff(p, m, q, ARGV[3], ARGV[4])
  return 1
end
if redis.call('LREM', q, 0, hid) > 0 then
  return 2
end
return 0
