-- semaphore_acquire.lua: grant n permits if they fit and nobody waits before
-- the caller, else queue the caller FIFO (when asked to wait).
-- KEYS[1] meta {ns}:sem:<name>   KEYS[2] holders {ns}:semh:<name>   KEYS[3] queue {ns}:q:sem:<name>
-- KEYS[4] the caller's lease {ns}:s:<sid>
-- ARGV[1] prefix {ns}:   ARGV[2] hold id   ARGV[3] "1" to queue when busy
-- ARGV[4] "1" for sharded pub/sub   ARGV[5] name   ARGV[6] n   ARGV[7] the caller's limit
-- Returns the bare token when its fast path grants (see parseAcquire), {1,
-- token} when the full path does (idempotent per hold id, even after the
-- limit changed); {0, wait ms, position or -1} when not; {-8, grace ms}
-- when not, during a restart grace, to a caller that does not queue; {-1}
-- when the caller's lease is gone; {-2, stored limit} when the stored limit
-- differs from the caller's (and no operator set it, see SetLimit) and the
-- caller is not queued, or when the caller asks for more than the stored
-- limit (a queued caller is then withdrawn): the caller holds and
-- waits for nothing after -2; {-5} when the epoch marker is missing (see
-- common.lua).
--@include semaphore_fast.lua
local p, hid, meta, holders, q = ARGV[1], ARGV[2], KEYS[1], KEYS[2], KEYS[3]

-- Fast path, before the helpers exist (see scripts.go): see
-- sem_acquire_fast in semaphore_fast.lua. Anything else takes the full
-- path below.
local lease = redis.call('HMGET', KEYS[4], 'g', 'x:' .. hid, 'ttl', 'ld')
if lease[1] == '0' and not lease[2] then
  local r = sem_acquire_fast(meta, holders, hid, ARGV[6], ARGV[7], lease[3], lease[4])
  if r then
    return r
  end
end

--@helpers
--@include semaphore_lib.lua
local stop, grace = check_caller(p, hid, ARGV[3])
if stop then
  return stop
end
-- A re-check of a hold id already granted is idempotent, whatever the limit
-- is now: answering -2 would leave a grant that its caller never learns of.
local tok = sem_held(holders, hid)
if tok then
  return {R_GRANTED, tok}
end
local n = tonumber(ARGV[6])
local entry = hid .. '#' .. ARGV[6]
local stored = redis.call('HGET', meta, 'limit')
if not stored then
  redis.call('HSET', meta, 'limit', ARGV[7])
  -- A new meta expires, as every key a grant or a wait keeps (a caller
  -- that neither holds nor waits, as during a restart grace, leaves it).
  keep_at_least(meta, held_ms_of(p, hid))
elseif stored ~= ARGV[7] and (not redis.call('HGET', meta, 'set') or n > tonumber(stored)) then
  -- A limit an operator set overrides every caller's, so that a rolling
  -- deploy can change it (see package semaphore); otherwise a different
  -- limit is a mismatch. A request queued before SetLimit keeps its place
  -- while it still fits the new limit; one that no longer does is withdrawn
  -- here, so that -2 never leaves the caller's entry behind in the queue.
  if not redis.call('LPOS', q, entry) then
    return {R_LIMIT_MISMATCH, tonumber(stored)}
  end
  if n > tonumber(stored) then
    redis.call('LREM', q, '0', entry)
    sem_serve(p, meta, holders, q, ARGV[4], ARGV[5])
    return {R_LIMIT_MISMATCH, tonumber(stored)}
  end
end
-- Serve the waiters ahead first: permits of dead holders may have come back.
sem_serve(p, meta, holders, q, ARGV[4], ARGV[5])
tok = sem_held(holders, hid)
if tok then
  return {R_GRANTED, tok}
end
if grace == 0 and not first_live(p, q) and sem_fits(p, meta, holders, n) then
  return {R_GRANTED, sem_grant(p, meta, holders, hid, n)}
end
local wait = grace
if grace == 0 then
  wait = sem_wait(p, meta, holders)
end
local reply = busy(q, entry, wait, ARGV[3], grace)
if reply[3] and reply[3] >= 0 then
  redis.call('HSET', meta, 'q', '1') -- queued: the waiter mark (see semaphore_lib.lua)
end
return reply
