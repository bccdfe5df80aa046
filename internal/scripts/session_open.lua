-- session_open.lua: create a session lease.
-- KEYS[1] lease {ns}:s:<sid>
-- ARGV[1] owner   ARGV[2] ttl ms   ARGV[3] lock delay ms
-- Returns 1 when created, 0 when the id is already taken.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'ttl', ARGV[2], 'ld', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
