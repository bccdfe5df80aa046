-- heartbeat.lua: renew a session lease and report the holds taken away from it.
-- KEYS[1] lease {ns}:s:<sid>
-- ARGV[1] ttl ms   ARGV[2] prefix {ns}:   ARGV[3..] revoked hold ids the
-- session has already handled
-- Returns {1, revoked hold ids...} when renewed; {0} when the lease no longer
-- exists; {2} when it no longer exists but Redis lost its data within the
-- restart grace (the session may reclaim); {-5} when the epoch marker is
-- missing. Cost is O(1 + revoked), whatever the number of holds: holds are
-- valid only while their session's lease exists, so renewing the lease
-- renews them all.
-- It declares one key and runs without the migration probe (see Script):
-- while the namespace's slot migrates, Redis runs it wherever the lease is,
-- so holds outlive a slot move longer than the TTL. The only key it reads
-- without declaring it, the epoch marker, it reads once the lease is gone
-- from the node that runs it, which during a move means gone from both
-- nodes: a marker that reads as absent there only sends the client to
-- recreate it (a probed script, which waits for the move to end).
if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 0 then
  local grace = grace_left(ARGV[2])
  if grace < 0 then
    return {R_EPOCH_MISSING}
  elseif grace > 0 then
    return {HB_RECLAIMABLE}
  end
  return {HB_GONE}
end
local out = {HB_RENEWED}
local r = redis.call('HGET', KEYS[1], 'r')
if r then
  local acked = {}
  for i = 3, #ARGV do
    acked[ARGV[i]] = true
  end
  local left = ''
  for hid in string.gmatch(r, '[^|]+') do
    if not acked[hid] then
      out[#out + 1] = hid
      left = left .. '|' .. hid
    end
  end
  if left == '' then
    redis.call('HDEL', KEYS[1], 'r')
  elseif left ~= r then
    redis.call('HSET', KEYS[1], 'r', left)
  end
end
return out
