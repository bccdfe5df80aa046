-- semaphore_acquire.lua: grant n permits if they fit and nobody waits before
-- the caller, else queue the caller FIFO (when asked to wait).
-- KEYS[1] meta {ns}:sem:<name>   KEYS[2] holders {ns}:semh:<name>   KEYS[3] queue {ns}:q:sem:<name>
-- KEYS[4] the caller's lease {ns}:s:<sid>
-- ARGV[1] prefix {ns}:   ARGV[2] hold id   ARGV[3] "1" to queue when busy
-- ARGV[4] "1" for sharded pub/sub   ARGV[5] name   ARGV[6] n   ARGV[7] the caller's limit
-- Returns {1, token} when granted (idempotent per hold id, even after the
-- limit changed); {0, wait ms, position or -1} when not; {-8, grace ms}
-- when not, during a restart grace, to a caller that does not queue; {-1}
-- when the caller's lease is gone; {-2, stored limit} when the stored limit
-- differs from the caller's (and no operator set it, see SetLimit) and the
-- caller is not queued, or when the caller asks for more than the stored
-- limit (a queued caller is then withdrawn): the caller holds and
-- waits for nothing after -2; {-5} when the epoch marker is missing (see
-- common.lua).
local p, hid, meta, holders, q = ARGV[1], ARGV[2], KEYS[1], KEYS[2], KEYS[3]

-- Fast path, before the helpers exist (see scripts.go): the caller's lease
-- exists with no grace pending (g = "0", see check_caller), hid is neither
-- withdrawn nor granted already, the stored limit is the caller's, the
-- permits fit without purging dead holders, the semaphore has a token and
-- nobody waits. Then grant as sem_grant would. Anything else takes the full
-- path below.
local lease = redis.call('HMGET', KEYS[4], 'g', 'x:' .. hid, 'ttl', 'ld')
if lease[1] == '0' and not lease[2] then
  local st = redis.call('HMGET', meta, 'limit', 'used', 'tok', 'set')
  local n = tonumber(ARGV[6])
  if st[1] == ARGV[7] and st[3] and tonumber(st[2] or '0') + n <= tonumber(st[1])
      and not redis.call('HGET', holders, hid) and redis.call('LLEN', q) == 0 then
    local tok, t = new_token(st[3])
    -- The value records the lock delay, if any, as sem_grant does.
    local v = ARGV[6] .. ':' .. tok
    if lease[4] and lease[4] ~= '0' then
      v = v .. ':' .. lease[4]
    end
    redis.call('HSET', holders, hid, v)
    redis.call('HSET', meta, 'tok', tok, 'i', 2 * lease[3])
    redis.call('HINCRBY', meta, 'used', ARGV[6])
    -- Keep both keys at least held_ms, never less (sem_keep in
    -- semaphore_lib.lua, spelled out: the helpers do not exist yet).
    -- meta has an expiry here (it had a token, so a grant or a release
    -- gave it one), unless an operator set the limit: it keeps none then.
    local held = 2 * lease[3] + lease[4]
    if redis.call('PEXPIRE', holders, held, 'NX') == 0 then
      redis.call('PEXPIRE', holders, held, 'GT')
    end
    if not st[4] then
      redis.call('PEXPIRE', meta, held, 'GT')
    end
    return {R_GRANTED, t}
  end
end

--@helpers
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
    redis.call('LREM', q, 0, entry)
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
return busy(q, entry, wait, ARGV[3], grace)
