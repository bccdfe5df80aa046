-- heartbeat.lua: renew a session lease and report the holds taken away from it.
-- KEYS[1] lease {ns}:s:<sid>   KEYS[2] revoked set {ns}:r:<sid>
-- ARGV[1] ttl ms   ARGV[2] prefix {ns}:   ARGV[3..] revoked hold ids the
-- session has already handled
-- Returns {1, revoked hold ids...} when renewed; {0} when the lease no longer
-- exists; {2} when it no longer exists but Redis lost its data within the
-- restart grace (the session may reclaim); {-5} when the epoch marker is
-- missing. Cost is O(1 + revoked), whatever the number of holds: holds are
-- valid only while their session's lease exists, so renewing the lease
-- renews them all.
if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 0 then
  local grace = grace_left(ARGV[2])
  if grace < 0 then
    return {-5}
  elseif grace > 0 then
    return {2}
  end
  return {0}
end
for i = 3, #ARGV do
  redis.call('SREM', KEYS[2], ARGV[i])
end
local out = {1}
if redis.call('PEXPIRE', KEYS[2], ARGV[1]) == 1 then
  for _, hid in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    out[#out + 1] = hid
  end
end
return out
