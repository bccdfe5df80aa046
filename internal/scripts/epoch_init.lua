-- epoch_init.lua: recreate the epoch marker after Redis lost its data.
-- KEYS[1] {ns}:epoch   ARGV[1] restart grace ms   ARGV[2] shard count
-- The marker "<until>|<grace>" holds the server time (ms) until which
-- grants are refused, counted from now, when the loss is noticed: a
-- holder's local deadline is at most one TTL after its last confirmed
-- heartbeat, which came before the loss, and so before now. Not from the
-- Redis process's start: a FLUSHALL, or a replica promoted empty, loses the
-- data of a server that has been up for long. It also records the grace,
-- which every later session of the namespace is checked against (see
-- session_open.lua). The first session to notice the loss sets the marker,
-- later ones leave it. A shard of a sharded namespace records its shard
-- count too ("<until>|<grace>|<shards>"); the client has checked the
-- namespace's other shards first (see Env.Guard).
-- ARGV[3] "1": replace a marker "0" too (marked intact, see MarkIntact,
-- and no session opened on it since), as a sharded session does in the
-- shards of a namespace whose guard it found missing: a "0" there did not
-- come with the guard's intact mark (MarkIntactShards writes both), so it
-- may have outlived a data loss of the namespace's other masters (see
-- GuardShards).
-- Returns the ms of grace left.
local v = redis.call('GET', KEYS[1])
if not v or (v == '0' and ARGV[3] == '1') then
  v = string.format('%.0f', now_ms() + tonumber(ARGV[1])) .. '|' .. ARGV[1]
  if tonumber(ARGV[2]) > 1 then
    v = v .. '|' .. ARGV[2]
  end
  redis.call('SET', KEYS[1], v)
end
return grace_left(prefix_of(KEYS[1]), v)
