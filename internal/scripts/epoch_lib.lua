-- epoch_lib.lua: helpers of the scripts that open, renew, reclaim and
-- verify a session (see scripts.go); not a script of its own.

-- epoch_grace returns the restart grace (ms, a number) recorded in epoch
-- marker value v ("<until>|<grace>", or "<until>|<grace>|<shards>" in a
-- shard of a sharded namespace), or nil when none is recorded.
local function epoch_grace(v)
  local g = string.match(v or '', '^%d+|(%d+)')
  return g and tonumber(g)
end

-- epoch_shards returns the shard count recorded in epoch marker value v
-- (a number): 1 for a marker without one, which is an unsharded
-- namespace's (see docs/design.md, "A namespace across a Cluster").
local function epoch_shards(v)
  local n = string.match(v or '', '^%d+|%d+|(%d+)$')
  return n and tonumber(n) or 1
end

-- repl_id returns the replication id of the server running the script
-- (master_replid of INFO replication): it changes when a replica is
-- promoted and when a server restarts, so a session that sees it change
-- checks that Redis still records its holds (see verify.lua). "" when the
-- server does not tell (an ACL user without +info, miniredis).
local function repl_id()
  local info = redis.pcall('INFO', 'replication')
  if type(info) == 'string' then
    return string.match(info, 'master_replid:(%w+)') or ''
  end
  return ''
end
