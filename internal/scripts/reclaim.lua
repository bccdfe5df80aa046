-- reclaim.lua (with mutex_lib.lua, semaphore_lib.lua, rwmutex_lib.lua,
-- epoch_lib.lua): after Redis lost its data, recreate a session's lease and its
-- holds with their old tokens, during the restart grace only.
-- KEYS[1] lease {ns}:s:<sid>   KEYS[2] {ns}:epoch
-- ARGV[1] prefix {ns}:   ARGV[2] owner   ARGV[3] ttl ms   ARGV[4] lock delay ms
-- ARGV[5] the session's shard count
-- ARGV[6..] groups of 6: kind ("m" "sem" "pool" "el" "rw"), name, hold id, token,
-- n (semaphore permits), extra (semaphore: limit; pool: member; election: value;
-- rwmutex: "r" for a read hold, "w" for a write one)
-- Returns {1, the namespace's restart grace ms (0 when none is recorded),
-- hold ids that could not be reclaimed...}; {0} when the lease
-- exists (renewed, nothing to reclaim); {-6} when not in a restart grace
-- (the lease was lost for real: the session must end) or when the marker
-- records another shard count (a session of another layout recreated it:
-- its names map to other shards, so nothing may be reclaimed here); {-5}
-- when the epoch marker is missing.
-- Within the grace nobody else can be granted anything, and every session
-- that held something before the loss either reclaims it before its own
-- local deadline or is gone, so a reclaim can only meet another reclaim of
-- the same resource if two sessions both believed they held it (a Reset
-- racing the crash); the second one then loses its hold.
--@include mutex_lib.lua
--@include semaphore_lib.lua
--@include rwmutex_lib.lua
--@include epoch_lib.lua
local p = ARGV[1]
if redis.call('PEXPIRE', KEYS[1], ARGV[3]) == 1 then
  return {RECLAIM_NONE}
end
local epoch = redis.call('GET', KEYS[2])
local grace = grace_left(p, epoch)
if grace < 0 then
  return {R_EPOCH_MISSING}
elseif grace == 0 or epoch_shards(epoch) ~= tonumber(ARGV[5]) then
  return {R_NOT_RECLAIMABLE}
end
-- 'g': a grace is pending (see check_caller).
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'ttl', ARGV[3], 'ld', ARGV[4], 'g', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[3])
-- Every reclaimed resource's keys are kept at least held_ms, as by a grant
-- (see common.lua); the session's heartbeat keeps them from then on.
local held = held_ms(ARGV[3], ARGV[4])

local function keep_max(k, f, tok)
  local last = tonumber(redis.call('HGET', k, f) or '0')
  if tok > last then
    redis.call('HSET', k, f, string.format('%.0f', tok))
  end
end

local function single(k, hid, tok)
  local cur = redis.call('HGET', k, 'hid')
  if cur == hid then
    keep_at_least(k, held)
    return true
  end
  if cur and alive(p, cur) then
    keep_max(k, 'tok', tok) -- the stored token stays the highest one known
    return false
  end
  redis.call('HSET', k, 'hid', hid, 'i', string.format('%.0f', 2 * tonumber(ARGV[3])))
  keep_at_least(k, held)
  if ARGV[4] ~= '0' then
    redis.call('HSET', k, 'ld', ARGV[4])
  end
  keep_max(k, 'tok', tok)
  return true
end

-- mutex is single for a mutex string (see mutex_lib.lua).
local function mutex(m, q, hid, tok)
  local st = m_load(m)
  local ok = true
  if st.hid ~= hid then
    if st.hid and alive(p, st.hid) then
      ok = false
    else
      st.hid, st.i, st.ld = hid, string.format('%.0f', 2 * tonumber(ARGV[3])), ARGV[4]
    end
  end
  if ok then
    st.held = held
  end
  if tok > tonumber(st.tok or '0') then
    st.tok = string.format('%.0f', tok) -- the stored token stays the highest one known
  end
  m_save(m, q, st)
  return ok
end

local lost = {RECLAIM_LOST, epoch_grace(epoch) or 0}
for i = 6, #ARGV, 6 do
  local kind, name, hid, tok, n, extra = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]), ARGV[i + 5]
  local ok = false
  if kind == 'm' then
    ok = mutex(p .. K_MUTEX .. name, p .. K_QUEUE .. 'm:' .. name, hid, tok)
  elseif kind == 'el' then
    local k = p .. K_ELECTION .. name
    ok = single(k, hid, tok)
    if ok then
      redis.call('HSET', k, 'val', extra)
    end
  elseif kind == 'sem' then
    local meta, holders = p .. K_SEMAPHORE .. name, p .. K_SEMAPHORE_HOLDERS .. name
    if redis.call('HEXISTS', holders, hid) == 1 then
      ok = true
      sem_keep(meta, holders, held)
    else
      if not redis.call('HGET', meta, 'limit') then
        redis.call('HSET', meta, 'limit', extra)
      end
      local limit = tonumber(redis.call('HGET', meta, 'limit'))
      if sem_purge(p, meta, holders) + n <= limit then
        -- The holder's lock delay, if any, as sem_grant records it.
        redis.call('HSET', holders, hid, n .. ':' .. string.format('%.0f', tok) .. (ARGV[4] ~= '0' and ':' .. ARGV[4] or ''))
        redis.call('HINCRBY', meta, 'used', n)
        redis.call('HSET', meta, 'i', string.format('%.0f', 2 * tonumber(ARGV[3])))
        sem_keep(meta, holders, held)
        keep_max(meta, 'tok', tok)
        ok = true
      end
    end
  elseif kind == 'rw' then
    ok = rw_reclaim(p, p .. K_RWMUTEX .. name, p .. K_RWMUTEX_READERS .. name, hid, tok, extra == 'r', ARGV[3], ARGV[4])
  elseif kind == 'pool' then
    local b = p .. K_POOL .. name .. ':'
    local cur = redis.call('HGET', b .. 'h', extra)
    if cur == hid then
      ok = true
    elseif not (cur and alive(p, cur)) then
      local sid = sid_of(hid)
      redis.call('ZREM', b .. 'f', extra)
      redis.call('HSET', b .. 'h', extra, hid)
      redis.call('HINCRBY', b .. 's', sid, '1')
      if ARGV[4] ~= '0' then -- the lock delay, as pool_grant records it
        redis.call('HSET', b .. K_POOL_INDEX .. sid, hid, extra, '~ld', ARGV[4])
      else
        redis.call('HSET', b .. K_POOL_INDEX .. sid, hid, extra)
      end
      keep_max(b .. 't', extra, tok)
      ok = true
    end
  end
  if not ok then
    lost[#lost + 1] = hid
  end
end
return lost
