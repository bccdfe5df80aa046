-- session_open.lua: create a session lease.
-- KEYS[1] lease {ns}:s:<sid>
-- ARGV[1] owner   ARGV[2] ttl ms   ARGV[3] lock delay ms   ARGV[4] prefix {ns}:
-- Returns 1 when created, 0 when the id is already taken, -5 when the epoch
-- marker is missing (see common.lua grace_left: the client recreates it and
-- tries again).
-- Field 'g' is "0" when no restart grace was pending (see check_caller).
if redis.call('EXISTS', KEYS[1]) == 1 then
  return OPEN_TAKEN
end
local grace = grace_left(ARGV[4])
if grace < 0 then
  return R_EPOCH_MISSING
end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'ttl', ARGV[2], 'ld', ARGV[3], 'g', grace == 0 and '0' or '1')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return OPEN_CREATED
