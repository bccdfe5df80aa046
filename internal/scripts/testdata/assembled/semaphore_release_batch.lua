local R_SLOW, REL_FREED = -9, 1
-- fastpath.lua: what the fast paths of scripts with a "--@helpers" line use;
-- first in those scripts and in the batch scripts only (see scripts.go,
-- batch.go), so it must stay small.

-- now_s: the server's clock in µs as a string, read at most once per call
-- by new_token.lua (inlined where a token is taken).
local now_s
-- semaphore_release_batch.lua: the fast path of semaphore_release.lua
-- (sem_release_fast, semaphore_fast.lua) for several releases of one
-- session at once (see batch.go).
-- KEYS per release: meta and holders (semaphore_release.lua's KEYS[1..2];
-- the fast path reads the waiter mark, not the queue)
-- ARGV per release: the hold id and its permits (semaphore_release.lua's
-- ARGV[2] and ARGV[5])
-- Returns one reply per release, in order: REL_FREED, or R_SLOW for one
-- the fast path does not cover (not held, waiters to serve, a lock delay
-- running): the client then sends semaphore_release.lua for that one
-- alone. A release answered R_SLOW changed nothing.
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
  -- new_token.lua: the next fencing token after last (a stored token, or
  -- false): max(last + 1, server time in µs), the rule of next_token in
  -- common.lua, as statement text inlined where a fast path takes a token
  -- (--@inline, see assemble.go), not a function: Redis would create the
  -- closure on every call of every script that has it, about 1.2k
  -- instructions, most of them for calls that take no token (a release with
  -- no hand-off). The includer names last and declares tok and n; now_s is
  -- fastpath.lua's. tok is the token as a string, n as what a reply carries:
  -- the same string when the clock wins (the client parses either; see
  -- parseAcquire), a number otherwise. The clock is what keeps tokens
  -- increasing when the stored token went back: a restart from an older
  -- snapshot, a failover to a replica that missed writes. The clock is read
  -- once per call: a batch script's tokens are of different resources, or
  -- above the last one anyway.
  --
  -- The clock's string is built from TIME's reply and compared with last as
  -- a string, so the common case formats and parses no number (a strtod of a
  -- token costs Redis more than the whole compare). Every stored token is a
  -- decimal integer without leading zeros (this string, or string.format's
  -- '%.0f'), so a shorter one, or one of the same length that sorts lower,
  -- is the smaller number. Lua compares strings with strcoll, under Redis'
  -- LC_COLLATE: digits collate in numeric order in the C locale and in
  -- glibc's. The one last that is not a token, a pool's highest free score
  -- (pool_mark_free), Redis prints as an integer below 2^52; miniredis
  -- prints one ending in eight zeros as "1.7e+15", which then loses to the
  -- clock even when above it: at worst a member ordered before one released
  -- earlier, never a token.
  if not now_s then
    local t = redis.call('TIME')
    local us = t[2]
    if #us < 6 then
      us = string.sub('00000' .. us, -6)
    end
    now_s = t[1] .. us
  end
  if last and (#last > #now_s or (#last == #now_s and last >= now_s)) then
    n = tonumber(last) + 1
    tok = string.format('%.0f', n)
  else
    tok, n = now_s, now_s
  end
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
  -- expiry_ms.lua: idle_ms and held_ms (see common.lua) of a grantee, as
  -- statement text inlined by the fast paths that grant (--@inline, see
  -- assemble.go), where the helpers do not exist. The includer names ttl and
  -- ld, the grantee's lease fields (strings; ld "0" without a lock delay);
  -- idle is 2 * ttl, held 2 * ttl + ld, both strings, each number formatted
  -- once: redis.call formats a number argument anew on every call
  -- (docs/performance.md), and without a lock delay held is idle.
  local idle = tostring(2 * ttl)
  local held = idle
  if ld ~= '0' then
    held = tostring(2 * ttl + ld)
  end
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
local out = {}
for i = 1, #ARGV / 2 do
  out[i] = sem_release_fast(KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 * i - 1], ARGV[2 * i]) or R_SLOW
end
return out
