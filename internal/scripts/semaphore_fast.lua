-- semaphore_fast.lua: the fast paths of semaphore_acquire.lua and
-- semaphore_release.lua, included by them before their helpers (see
-- scripts.go) and by their batch scripts (see batch.go), which run them
-- for several calls of one session at once. Each returns a reply, or nil
-- when the full path must decide; nil means nothing was changed.

-- sem_acquire_fast grants n permits (string n_s) to hid as sem_grant would,
-- when that takes nothing else: the stored limit is the caller's, hid holds
-- nothing yet, the permits fit without purging dead holders, the semaphore
-- has a token and no waiter mark (nobody waits, see semaphore_lib.lua). The caller checked hid's lease: it exists
-- with no grace pending (g = "0", see check_caller) and hid is not
-- withdrawn; ttl and ld are the lease's fields.
local function sem_acquire_fast(meta, holders, hid, n_s, limit, ttl, ld)
  local st = redis.call('HMGET', meta, 'limit', 'used', 'tok', 'set', 'q')
  if st[1] ~= limit or not st[3] or st[5] then
    return nil
  end
  -- used: the permits in use after the grant; the string n_s when none
  -- are in use now (redis.call formats a number argument, which costs
  -- Redis more than the rest of this test, see docs/performance.md).
  local lim, used = tonumber(st[1]), n_s
  if st[2] and st[2] ~= '0' then
    used = tonumber(st[2]) + tonumber(n_s)
    if used > lim then
      return nil
    end
  elseif tonumber(n_s) > lim then
    return nil
  end
  local last, tok, n = st[3]
  --@inline new_token.lua
  -- The value records the lock delay, if any, as sem_grant does. HSETNX
  -- writes nothing when hid holds permits already (a retried grant, which
  -- the full path answers).
  local v = n_s .. ':' .. tok
  if ld and ld ~= '0' then
    v = v .. ':' .. ld
  end
  if redis.call('HSETNX', holders, hid, v) == 0 then
    return nil
  end
  --@inline expiry_ms.lua
  redis.call('HSET', meta, 'tok', tok, 'i', idle, 'used', used)
  -- Keep both keys at least held_ms, never less (sem_keep in
  -- semaphore_lib.lua, spelled out: the helpers do not exist yet). meta
  -- has an expiry here (it had a token, so a grant or a release gave it
  -- one), unless an operator set the limit: it keeps none then.
  if redis.call('PEXPIRE', holders, held, 'NX') == 0 then
    redis.call('PEXPIRE', holders, held, 'GT')
  end
  if not st[4] then
    redis.call('PEXPIRE', meta, held, 'GT')
  end
  return n -- a grant: its bare token (see parseAcquire)
end

-- sem_release_fast returns the n permits (string n_s, as granted) of hid
-- when that takes nothing else: hid holds them, no waiter mark (nobody
-- waits: sem_serve would grant nothing), and no lock delay is recorded (one might be
-- running when the release leaves the semaphore idle, which sem_idle sees
-- to). "used" counts exactly the permits of the recorded holders when no
-- lock delay is recorded (see semaphore_lib.lua), so it tells whether the
-- release left the semaphore idle.
local function sem_release_fast(meta, holders, hid, n_s)
  local m = redis.call('HMGET', meta, 'i', 'set', 'delay', 'q')
  if m[4] or (m[3] and not m[2]) or redis.call('HDEL', holders, hid) == 0 then
    return nil
  end
  if redis.call('HINCRBY', meta, 'used', '-' .. n_s) <= 0 and m[1] and not m[2] then
    -- Idle now: kept 'i' ms (see common.lua), or for good when an
    -- operator set the limit.
    redis.call('PEXPIRE', meta, m[1])
  end
  return REL_FREED
end
