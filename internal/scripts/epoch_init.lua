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
-- namespace's shards first (a sharded one through its guard, see
-- GuardShards; an unsharded one reads shards 0-63, see Env.InitEpoch).
-- ARGV[3] "1": instead, replace a marker "0" only (marked intact, see
-- MarkIntact, and no session opened on it since), leaving a missing one
-- missing; a sharded session does that in its shards, before it creates
-- the guard of a namespace whose guard it found missing: a "0" there did
-- not come with the guard's intact mark (MarkIntactShards writes both),
-- so it may have outlived a data loss of the namespace's other masters.
-- Returns the ms of grace left (-1 when the marker is missing).
local v = redis.call('GET', KEYS[1])
local set = not v
if ARGV[3] == '1' then
  set = v == '0'
end
if set then
  v = string.format('%.0f', now_ms() + tonumber(ARGV[1])) .. '|' .. ARGV[1]
  if tonumber(ARGV[2]) > 1 then
    v = v .. '|' .. ARGV[2]
  end
  redis.call('SET', KEYS[1], v)
end
return grace_left(prefix_of(KEYS[1]), v)
