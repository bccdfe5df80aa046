-- shards_guard.lua: read, or create, the guard of a sharded namespace: the
-- key {ns}:epoch as a hash (shards, v), where an unsharded namespace keeps
-- its epoch marker string (see docs/design.md, "A namespace across a
-- Cluster"). Every script of an unsharded session reads that marker with
-- GET, which fails with WRONGTYPE on the hash, and session_open.lua refuses
-- it by name: neither an unsharded session of this release nor one of a
-- release before shards can open, or grant, beside sharded ones.
-- KEYS[1] {ns}:epoch   ARGV[1] shard count   ARGV[2] layout version
-- ARGV[3] "0": read only; "1": create the guard when it is missing; "2":
-- re-assert it, as a live sharded session's heartbeat does: create it when
-- missing and replace an unsharded marker found in its place (a session
-- without the shard count, or of a release before shards, opened while the
-- guard was lost with its master's data: it is still inside its restart
-- grace, and the hash makes its scripts fail before it grants anything)
-- Returns {GUARD_FOUND, shards, version} when the guard exists (or was
-- created), with a fourth element 1 when it replaced an unsharded marker; {GUARD_MISSING} when it is missing and was not created;
-- {GUARD_UNSHARDED} when the key is an unsharded namespace's epoch marker.
-- (GET rather than TYPE, so that the ACL stays the one documented: on the
-- hash it fails with WRONGTYPE.)
-- A marker "0" was marked intact (MarkIntact) and no session has opened on
-- it since (the first records its grace): it counts as missing.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'string' and v ~= '0' and ARGV[3] ~= '2' then
  return {GUARD_UNSHARDED}
elseif type(v) == 'string' or not v then
  if ARGV[3] == '0' then
    return {GUARD_MISSING}
  end
  if v then
    redis.call('DEL', KEYS[1])
  end
  redis.call('HSET', KEYS[1], 'shards', ARGV[1], 'v', ARGV[2])
  if v and v ~= '0' then
    return {GUARD_FOUND, tonumber(ARGV[1]), tonumber(ARGV[2]), 1} -- replaced an unsharded marker
  end
  return {GUARD_FOUND, tonumber(ARGV[1]), tonumber(ARGV[2])}
end
local f = redis.call('HMGET', KEYS[1], 'shards', 'v')
return {GUARD_FOUND, tonumber(f[1] or '0'), tonumber(f[2] or '0')}
