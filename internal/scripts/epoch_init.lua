-- epoch_init.lua: recreate the epoch marker after Redis lost its data.
-- KEYS[1] {ns}:epoch   ARGV[1] grace ms still to impose (RestartGrace minus
-- the Redis process's uptime, or 0)
-- The marker holds the server time (ms) until which grants are refused; the
-- first session to notice the loss sets it, later ones leave it.
-- Returns the ms of grace left.
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], string.format('%.0f', now_ms() + tonumber(ARGV[1])))
end
return math.max(tonumber(redis.call('GET', KEYS[1])) - now_ms(), 0)
