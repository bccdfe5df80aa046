-- pool_members.lua: change the members of a pool.
-- KEYS as in pool_acquire.lua.
-- ARGV[1] prefix {ns}:   ARGV[2] "1" for sharded pub/sub   ARGV[3] pool name
-- ARGV[4] base "{ns}:pool:<name>:"   ARGV[5] op: "add", "remove" or "replace"
-- ARGV[6..] members
-- add: new members become free (never used: first in line); existing ones are
-- left alone. remove: every named member must exist, else nothing changes and
-- {-3, member} is returned; a held member's hold is taken away (its session
-- is told); a member in a lost holder's lock delay goes at once (see
-- pool_lib.lua). replace: the members become exactly ARGV[6..].
-- After any change, queued waiters are served: they may take new members, and
-- waiters for a removed member are dropped and told to re-check (they then
-- fail with ErrNotMember).
-- Returns {added, removed}.
--@include pool_core.lua
--@helpers
--@include pool_lib.lua
local p, q, b, op = ARGV[1], KEYS[1], ARGV[4], ARGV[5]
local function remove(k)
  local h = redis.call('HGET', b .. 'h', k)
  if h then
    pool_unhold(b, k, h)
    if alive(p, h) then
      revoke(p, ARGV[2], h)
    end
  end
  redis.call('ZREM', b .. 'f', k)
  redis.call('ZREM', b .. 'd', k)
end
local added, removed = 0, 0
if op == 'remove' then
  for i = 6, #ARGV do
    if not pool_is_member(b, ARGV[i]) then
      return {R_NOT_MEMBER, ARGV[i]}
    end
  end
  for i = 6, #ARGV do
    if pool_is_member(b, ARGV[i]) then
      remove(ARGV[i])
      removed = removed + 1
    end
  end
  pool_serve(p, b, q, ARGV[2], ARGV[3])
  return {added, removed}
end
if op == 'replace' then
  local keep = {}
  for i = 6, #ARGV do
    keep[ARGV[i]] = true
  end
  local cur = redis.call('ZRANGE', b .. 'f', '0', '-1')
  for _, k in ipairs(redis.call('HKEYS', b .. 'h')) do
    cur[#cur + 1] = k
  end
  for _, k in ipairs(cur) do
    if not keep[k] then
      remove(k)
      removed = removed + 1
    end
  end
end
for i = 6, #ARGV do
  if not pool_is_member(b, ARGV[i]) then
    redis.call('ZADD', b .. 'f', '0', ARGV[i])
    added = added + 1
  end
end
-- Serve waiters: new members may be wanted, and waiters for a removed
-- member are told to re-check (they then fail with ErrNotMember).
if added > 0 or removed > 0 then
  pool_serve(p, b, q, ARGV[2], ARGV[3])
end
return {added, removed}
