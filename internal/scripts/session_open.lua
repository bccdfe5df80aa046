-- session_open.lua (with epoch_lib.lua): create a session lease.
-- KEYS[1] lease {ns}:s:<sid>
-- ARGV[1] owner   ARGV[2] ttl ms   ARGV[3] lock delay ms   ARGV[4] prefix {ns}:
-- ARGV[5] the session's restart grace ms   ARGV[6] the session's shard count
-- Returns {1, namespace grace ms, replication id} when created; {0} when
-- the id is already taken; {-5} when the epoch marker is missing (see
-- common.lua grace_left: the client recreates it and tries again);
-- {-10, namespace grace ms} when the session does not fit the namespace's
-- restart grace: its TTL is longer (a data loss would let others be
-- granted what it still holds) or its own grace is shorter (it would set
-- too short a grace after the next loss); {-11, the namespace's shard
-- count} when the namespace was laid out with another shard count (0: the
-- marker is a sharded namespace's guard hash, see shards_guard.lua).
-- The namespace's grace is the one recorded in the epoch marker; a marker
-- without one (marked intact by a test or an example) gets this session's.
-- Field 'g' is "0" when no restart grace was pending (see check_caller).
--@include epoch_lib.lua
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {OPEN_TAKEN}
end
local epoch = ARGV[4] .. K_EPOCH
local v = redis.pcall('GET', epoch)
if type(v) == 'table' then
  return {R_SHARDS_MISMATCH, 0} -- WRONGTYPE: a sharded namespace's guard hash
elseif not v then
  return {R_EPOCH_MISSING}
end
local g = epoch_grace(v)
local n = tonumber(ARGV[6])
if not g then
  g = tonumber(ARGV[5])
  redis.call('SET', epoch, string.match(v, '^%d+') .. '|' .. ARGV[5] .. (n > 1 and '|' .. ARGV[6] or ''))
elseif epoch_shards(v) ~= n then
  return {R_SHARDS_MISMATCH, epoch_shards(v)}
elseif tonumber(ARGV[2]) > g or tonumber(ARGV[5]) < g then
  return {R_GRACE_MISMATCH, g}
end
local grace = grace_left(ARGV[4], v)
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'ttl', ARGV[2], 'ld', ARGV[3], 'g', grace == 0 and '0' or '1')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {OPEN_CREATED, g, repl_id()}
