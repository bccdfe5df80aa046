-- set.lua: write the value if the token is at least the key's mark.
-- KEYS[1] mark <tag>:hi   KEYS[2] value hash <tag>:v (fields v, t)
-- ARGV[1] token   ARGV[2] value   ARGV[3] TTL in ms, '0' for none
-- Returns {1} when written (the mark raised to the token), {0, mark} when a
-- higher token has used the key (nothing changed).
local mark = admit(ARGV[1])
if mark then
  return {0, mark}
end
redis.call('HSET', KEYS[2], 'v', ARGV[2], 't', ARGV[1])
if ARGV[3] == '0' then
  redis.call('PERSIST', KEYS[2])
else
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return {1}
