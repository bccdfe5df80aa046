-- flight_get.lua: read the cached outcome of one flight key (it writes nothing).
-- KEYS[1] flight entry {ns}:f:<group>:<key>
-- Returns {value or false, value token, value fresh (1/0), error message or
-- false, error token, error fresh (1/0)}; a missing entry gives
-- {false, 0, 0, false, 0, 0}. Fresh means: server time now is before the
-- fresh-until instant the store script recorded (vx, ex; server ms).
local v = redis.call('HMGET', KEYS[1], 'v', 'vt', 'vx', 'e', 'et', 'ex')
if not v[1] and not v[4] then
  return {false, 0, 0, false, 0, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function fresh(x)
  if x and now < tonumber(x) then
    return 1
  end
  return 0
end
return {v[1], tonumber(v[2] or '0'), fresh(v[3]), v[4], tonumber(v[5] or '0'), fresh(v[6])}
