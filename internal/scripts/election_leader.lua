-- election_leader.lua: read the leader (read-only).
-- KEYS[1] {ns}:el:<name>   ARGV[1] prefix {ns}:
-- Returns {term, hold id, value, lease pttl ms}, or {0, "", "", -2} when
-- nobody leads (no leader recorded, or its lease is gone).
local p, k = ARGV[1], KEYS[1]
local hid = redis.call('HGET', k, 'hid')
if not hid or not alive(p, hid) then
  return {0, '', '', -2}
end
return {tonumber(redis.call('HGET', k, 'tok')), hid, redis.call('HGET', k, 'val') or '', lease_pttl(p, hid)}
