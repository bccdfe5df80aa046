-- delete.lua: delete the value if the token is at least the key's mark; the
-- mark stays, so that a lower token cannot create the key again.
-- KEYS[1] mark <tag>:hi   KEYS[2] value hash <tag>:v
-- ARGV[1] token
-- Returns {1} when deleted (or already absent; the mark raised to the
-- token), {0, mark} when a higher token has used the key (nothing changed).
local mark = admit(ARGV[1])
if mark then
  return {0, mark}
end
redis.call('DEL', KEYS[2])
return {1}
