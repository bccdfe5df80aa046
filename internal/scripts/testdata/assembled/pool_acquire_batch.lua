local R_GRANTED, R_SLOW, K_POOL_INDEX, P_HOLD_SID = 1, -9, "i:", "^([^.]+)%."
-- fastpath.lua: what the fast paths of scripts with a "--@helpers" line use;
-- first in those scripts and in the batch scripts only (see scripts.go,
-- batch.go), so it must stay small.

-- now_s: the server's clock in µs as a string, read at most once per call
-- by new_token.lua (inlined where a token is taken).
local now_s
-- pool_acquire_batch.lua: the fast path of pool_acquire.lua
-- (pool_acquire_fast.lua) for several acquire attempts of one
-- session at once (see batch.go): one call and one read of the caller's
-- lease for all of them.
-- KEYS[1] the caller's lease {ns}:s:<sid>, then per attempt its pool's
-- queue {ns}:q:pool:<name>
-- ARGV per attempt: hold id, base "{ns}:pool:<name>:", member wanted ("" for
-- any): pool_acquire.lua's ARGV[2], ARGV[6], ARGV[7]
-- Returns one reply per attempt, in order: the fast path's grant, or
-- {R_SLOW} for an attempt it does not cover (no lease with g = "0", a
-- withdrawn hold id, or anything pool_acquire_fast leaves to the full
-- path): the client then sends pool_acquire.lua for that one alone. An
-- attempt answered {R_SLOW} changed nothing.
-- pool_acquire_fast.lua: the fast path of pool_acquire.lua and what it
-- takes of the operations on one pool member (see pool_core.lua). It goes
-- before that fast path and in pool_acquire_batch.lua, so it uses nothing
-- but new_token.lua (inlined) and fastpath.lua's now_s: no helper of
-- common.lua exists there yet. Each function here is a closure Redis
-- creates on every call of a script that has it, so a script's fast path
-- has only the ones it runs: pool_release_fast.lua has the release's.

-- pool_free_one returns the least recently released free member, or nil.
local function pool_free_one(b)
  local k = redis.call('ZRANGE', b .. 'f', '0', '0')
  return k[1]
end

local function pool_is_free(b, key)
  return redis.call('ZSCORE', b .. 'f', key) ~= false
end

-- pool_take makes hid, of session sid, the holder of member key, which the
-- caller has taken out of the free set and entered in sid's index, and
-- returns its token, max(last + 1, server time in µs) (new_token.lua).
local function pool_take(b, key, hid, sid)
  redis.call('HSET', b .. 'h', key, hid)
  redis.call('HINCRBY', b .. 's', sid, '1')
  local last, tok, n = redis.call('HGET', b .. 't', key)
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
  redis.call('HSET', b .. 't', key, tok)
  return n
end

-- pool_acquire_fast grants hid a free member (any: the least recently
-- released; or want) when that takes nothing else: nobody waits, hid has
-- no entry in its session's index (it holds nothing yet), and a member is
-- free without reaping dead holders. The caller checked hid's lease: it
-- exists with no grace pending (g = "0", see check_caller) and hid is not
-- withdrawn; ld is its lock delay. It returns the reply, or nil, having
-- changed nothing, for the full path.
-- It does pool_grant's work with one command less when the session has no
-- lock delay: HSETNX writes hid's index entry only when hid has none,
-- which is pool_held_by's question (an entry means a retried grant, or a
-- stale entry whose member hid no longer holds: both the full path's).
local function pool_acquire_fast(q, b, hid, want, ld)
  if redis.call('LLEN', q) ~= 0 then
    return nil
  end
  local k
  if want == '' then
    k = pool_free_one(b)
  elseif pool_is_free(b, want) then
    k = want
  end
  if not k then
    return nil
  end
  local sid = string.match(hid, P_HOLD_SID)
  local idx = b .. K_POOL_INDEX .. sid
  if redis.call('HSETNX', idx, hid, k) == 0 then
    return nil
  end
  redis.call('ZREM', b .. 'f', k)
  if ld and ld ~= '0' then
    redis.call('HSET', idx, '~ld', ld)
  end
  return {R_GRANTED, pool_take(b, k, hid, sid), k}
end

local n = #ARGV / 3
local fields = {'g', 'ld'}
for i = 1, n do
  fields[i + 2] = 'x:' .. ARGV[3 * i - 2]
end
local lease = redis.call('HMGET', KEYS[1], unpack(fields))
local out = {}
for i = 1, n do
  local r
  if lease[1] == '0' and not lease[i + 2] then
    r = pool_acquire_fast(KEYS[i + 1], ARGV[3 * i - 1], ARGV[3 * i - 2], ARGV[3 * i], lease[2])
  end
  out[i] = r or {R_SLOW}
end
return out
