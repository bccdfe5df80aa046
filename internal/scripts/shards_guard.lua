-- shards_guard.lua: read, or create, the guard of a sharded namespace: the
-- key {ns}:epoch as a hash (shards, v), where an unsharded namespace keeps
-- its epoch marker string (see docs/design.md, "A namespace across a
-- Cluster"). Every script of an unsharded session reads that marker with
-- GET, which fails with WRONGTYPE on the hash, and session_open.lua refuses
-- it by name: neither an unsharded session of this release nor one of a
-- release before shards can open, or grant, beside sharded ones.
-- KEYS[1] {ns}:epoch   ARGV[1] shard count   ARGV[2] layout version
-- ARGV[3] "1": create the guard when it is missing
-- Returns {GUARD_FOUND, shards, version} when the guard exists (or was
-- created); {GUARD_MISSING} when it is missing and was not created;
-- {GUARD_UNSHARDED} when the key is an unsharded namespace's epoch marker.
-- (GET rather than TYPE, so that the ACL stays the one documented: on the
-- hash it fails with WRONGTYPE.)
-- A marker "0" was marked intact (MarkIntact) and no session has opened on
-- it since (the first records its grace): it counts as missing.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'string' and v ~= '0' then
  return {GUARD_UNSHARDED}
elseif not v or v == '0' then
  if ARGV[3] ~= '1' then
    return {GUARD_MISSING}
  end
  if v then
    redis.call('DEL', KEYS[1])
  end
  redis.call('HSET', KEYS[1], 'shards', ARGV[1], 'v', ARGV[2])
  return {GUARD_FOUND, tonumber(ARGV[1]), tonumber(ARGV[2])}
end
local f = redis.call('HMGET', KEYS[1], 'shards', 'v')
return {GUARD_FOUND, tonumber(f[1] or '0'), tonumber(f[2] or '0')}
