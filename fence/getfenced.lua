-- getfenced.lua: read the value if the token is at least the key's mark,
-- and raise the mark to the token, so that no lower token can write after
-- this read.
-- KEYS[1] mark <tag>:hi   KEYS[2] value hash <tag>:v
-- ARGV[1] token
-- Returns {1, value, writer's token} when read, {1} when the key has no
-- value (the mark raised all the same), {0, mark} when a higher token has
-- used the key (nothing changed).
local mark = admit(ARGV[1])
if mark then
  return {0, mark}
end
local r = redis.call('HMGET', KEYS[2], 'v', 't')
if not r[1] then
  return {1}
end
return {1, r[1], r[2]}
