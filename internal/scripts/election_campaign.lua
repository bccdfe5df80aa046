-- election_campaign.lua: become leader if nobody leads and no candidate is
-- queued before the caller, else queue as a candidate (when asked to wait).
-- KEYS[1..3] see election_lib.lua
-- ARGV[1] prefix {ns}:   ARGV[2] hold id   ARGV[3] "1" to queue when busy
-- ARGV[4] "1" for sharded pub/sub   ARGV[5] election name   ARGV[6] value
-- ARGV[7] observer channel {ns}:elw:<name>
-- Returns {1, term} when leader (idempotent per hold id); {0, wait ms,
-- position or -1} when not; {-8, grace ms} when not, during a restart grace,
-- to a caller that does not queue; {-1} when the caller's lease is gone;
-- {-5} when the epoch marker is missing (see common.lua grace_left).
-- Nobody is elected during a restart grace. A caller whose lease is missing
-- then is not told it is gone: its session may still reclaim it (heartbeat),
-- so it is told to come back when the grace is over.
--@include election_lib.lua
local p, hid, k, q, c = ARGV[1], ARGV[2], KEYS[1], KEYS[2], KEYS[3]
local stop, grace = check_caller(p, hid, ARGV[3])
if stop then
  return stop
end
local st = single_state(k)
if st.hid == hid then
  return {R_GRANTED, tonumber(st.tok)}
end
local had = st.hid
local free, wait = single_free(p, k, st)
if free and grace > 0 then
  free, wait = false, grace
end
if free then
  if had then
    -- The leader's lease is gone: observers learn that nobody leads.
    redis.call('HDEL', k, 'val')
    el_announce(ARGV[4], ARGV[7], 0, '', '')
  end
  local nxt = el_first_live(p, q, c)
  if not nxt or nxt == hid then
    if nxt then
      redis.call('LPOP', q)
    end
    return {R_GRANTED, el_grant(p, k, c, hid, ARGV[6], ARGV[4], ARGV[7])}
  end
  el_handoff(p, k, q, c, ARGV[4], ARGV[5], ARGV[7])
  wait = lease_pttl(p, nxt)
end
if ARGV[3] == '1' then
  redis.call('HSET', c, hid, ARGV[6])
  keep_at_least(c, held_ms_of(p, hid)) -- then the candidates' heartbeats keep it
elseif not st.hid then
  single_idle(k, q) -- a lock delay or a grace: nobody leads, maybe nobody waits
end
return busy(q, hid, wait, ARGV[3], grace)
