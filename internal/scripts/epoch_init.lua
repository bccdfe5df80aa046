-- epoch_init.lua: recreate the epoch marker after Redis lost its data.
-- KEYS[1] {ns}:epoch   ARGV[1] restart grace ms
-- The marker holds the server time (ms) until which grants are refused: the
-- restart grace counted from the Redis process's start, so a server up for
-- longer than the grace imposes none. The uptime comes from INFO server on
-- this node, the one that owns the namespace's slot. Redis computes
-- uptime_in_seconds from whole-second clock readings, so it can be almost a
-- second more than the real uptime: one second less is counted. A server
-- that cannot tell its uptime (miniredis, or an ACL user without +info)
-- gets the whole grace. The first session to notice the loss sets the
-- marker, later ones leave it.
-- Returns the ms of grace left.
if redis.call('EXISTS', KEYS[1]) == 0 then
  local uptime_ms = 0
  local info = redis.pcall('INFO', 'server')
  if type(info) == 'string' then
    local s = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
    if s then
      uptime_ms = math.max(s - 1, 0) * 1000
    end
  end
  local grace = math.max(tonumber(ARGV[1]) - uptime_ms, 0)
  redis.call('SET', KEYS[1], string.format('%.0f', now_ms() + grace))
end
return math.max(tonumber(redis.call('GET', KEYS[1])) - now_ms(), 0)
