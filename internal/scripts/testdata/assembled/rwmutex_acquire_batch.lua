local R_BUSY, R_SLOW, K_LEASE, P_HOLD_SID = 0, -9, "s:", "^([^.]+)%."
-- fastpath.lua: what the fast paths of scripts with a "--@helpers" line use;
-- first in those scripts and in the batch scripts only (see scripts.go,
-- batch.go), so it must stay small.

-- now_s: the server's clock in µs as a string, read at most once per call
-- by new_token.lua (inlined where a token is taken).
local now_s
-- rwmutex_acquire_batch.lua: the fast path of rwmutex_acquire.lua for
-- several acquire attempts of one session at once (see batch.go): one
-- call, one read of the caller's lease and at most one TIME for all of
-- them (new_token.lua, fastpath.lua's now_s). The fast path is
-- rwmutex_acquire_fast.lua, as in rwmutex_acquire.lua.
-- KEYS[1] the caller's lease {ns}:s:<sid>, then per attempt the mutex
-- {ns}:rw:<name>, its readers {ns}:rwr:<name> and its queue
-- {ns}:q:rw:<name> (as rwmutex_acquire.lua's KEYS[1..3]; two attempts may
-- name the same mutex: they run in order, as two calls would)
-- ARGV per attempt: "<queue><shared><hid>": queue "1" to queue when busy,
-- shared "1" for a read hold, then the hold id
-- Returns one reply per attempt, in order: the reply rwmutex_acquire.lua's
-- fast path would give, or {R_SLOW} for an attempt the fast path does not
-- cover (no lease with g = "0", a withdrawn hold id, or anything
-- rwmutex_acquire_fast.lua leaves to the full path): the client then
-- sends rwmutex_acquire.lua for that one alone. An attempt answered
-- {R_SLOW} changed nothing.
local n = #ARGV
local fields = {'g', 'ttl', 'ld'}
for i = 1, n do
  fields[i + 3] = 'x:' .. string.sub(ARGV[i], 3)
end
local lease = redis.call('HMGET', KEYS[1], unpack(fields))
local out = {}
for i = 1, n do
  local reply
  if lease[1] == '0' and not lease[i + 3] then
    local aq = ARGV[i]
    local k, rd, q, hid = KEYS[3 * i - 1], KEYS[3 * i], KEYS[3 * i + 1], string.sub(aq, 3)
    local shared, ttl, ld = string.sub(aq, 2, 2) == '1', lease[2], lease[3]
    -- rwmutex_acquire_fast.lua: the fast path of a read-write mutex acquire
    -- attempt, as statement text (no function: see mutex_acquire_fast.lua),
    -- inlined where it runs (--@inline, see assemble.go): by
    -- rwmutex_acquire.lua before its helpers, and by rwmutex_acquire_batch.lua
    -- in its loop over the attempts.
    -- The includer has checked the caller's lease: it exists with no grace
    -- pending (g = "0", see check_caller) and hid is not withdrawn. It sets k
    -- (the mutex hash), rd (its readers hash), q (its queue), hid, shared
    -- (true for a read hold), aq (a string whose first character is "1" to
    -- queue when busy), ttl and ld (the lease's fields 'ttl' and 'ld', ld
    -- false when unset).
    -- It returns the reply (as rwmutex_acquire.lua's), or goes on past its
    -- end, having changed nothing, for what the full path must decide: a
    -- mutex without a token or with its waiter mark (see rw_mark), a lock
    -- delay, a dead writer, readers a writer must wait for, a retried grant.
    local st = redis.call('HMGET', k, 'w', 'tok', 'q', 'free', 'wfree')
    local writer = st[1]
    if not writer and st[2] and not st[3] and not st[4] then
      -- No writer, no lock delay keeping everyone out, nobody waiting: a
      -- reader is granted unless it already is (a retry: the full path
      -- returns its token); a writer when no reader holds (dead ones too:
      -- the full path clears them) and no lost reader's lock delay runs.
      local ok
      if not shared then
        ok = not st[5] and redis.call('EXISTS', rd) == 0
      end
      if shared or ok then
        local last, tok, n = st[2]
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
        local ld = ld or '0' -- the lease's, "0" when unset
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
        if shared then
          -- HSETNX: a retry (hid already there) takes the full path, which
          -- returns its token.
          ok = redis.call('HSETNX', rd, hid, ld .. ':' .. tok) == 1
        end
        if ok then
          -- Keep the keys at least held_ms, never less (see common.lua
          -- keep_at_least): readers share them, so only raise their expiry
          -- (a new readers hash has none: NX). A writer holds k alone: k
          -- has existed since a grant or an idle release gave it an expiry.
          if shared then
            redis.call('HSET', k, 'tok', tok, 'i', idle)
            if redis.call('PEXPIRE', rd, held, 'NX') == 0 then
              redis.call('PEXPIRE', rd, held, 'GT')
            end
            redis.call('PEXPIRE', k, held, 'GT')
          else
            redis.call('HSET', k, 'w', hid, 'wld', ld, 'tok', tok, 'i', idle)
            redis.call('PEXPIRE', k, held)
          end
          reply = n -- a grant: its bare token (see parseAcquire)
        end
      end
    elseif writer and writer ~= hid then
      -- A writer holds: busy while its session is live, the same reply as
      -- busy() in common.lua. (Spelled out, like sid_of and prefix_of, as in
      -- mutex_acquire_fast.lua.)
      local p = string.match(k, '^{[^}]*}:')
      local wait = redis.call('PTTL', p .. K_LEASE .. string.match(writer, P_HOLD_SID))
      if wait > 0 then
        if string.sub(aq, 1, 1) ~= '1' then
          reply = {R_BUSY, wait, -1}
        else
          local e = hid .. (shared and '|r' or '|w')
          local pos = redis.call('LPOS', q, e)
          if not pos then
            pos = redis.call('RPUSH', q, e) - 1
            if pos == 0 then
              -- A new queue expires unless its waiters' heartbeats keep it.
              redis.call('PEXPIRE', q, 2 * ttl + (ld or '0'))
            end
            if not st[3] then
              redis.call('HSET', k, 'q', '1') -- see rw_mark; k has 'i' (a grant set it)
            end
          end
          reply = {R_BUSY, wait, pos}
        end
      end
    end
  end
  out[i] = reply or {R_SLOW}
end
return out
