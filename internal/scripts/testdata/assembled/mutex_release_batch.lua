local R_SLOW, REL_FREED, K_LEASE, K_CHANNEL, K_QUEUE, P_HOLD_SID = -9, 1, "s:", "n:", "q:", "^([^.]+)%."
-- fastpath.lua: what the fast paths of scripts with a "--@helpers" line use;
-- first in those scripts and in the batch scripts only (see scripts.go,
-- batch.go), so it must stay small.

-- now_s: the server's clock in µs as a string, read at most once per call
-- by new_token.lua (inlined where a token is taken).
local now_s
-- mutex_release_batch.lua: the fast paths of mutex_release.lua for several
-- releases of one session at once (see batch.go): one call, and at most
-- one TIME for all of them.
-- The fast paths are mutex_release_fast.lua, as in mutex_release.lua.
-- KEYS[1..n] the mutexes {ns}:m:<name>, one per release
-- ARGV[1] "<sharded>": "1" for sharded pub/sub   ARGV[2..n+1] the hold ids,
-- all of one session
-- Returns one reply per release, in order: REL_FREED when released (and
-- handed to the first live waiter, if any), or R_SLOW for a release the
-- fast paths do not cover (not held by that hold id, a lock delay, a dead
-- first waiter ...): the client then sends mutex_release.lua for that one
-- alone. A release answered R_SLOW changed nothing.
local n = #ARGV - 1
local out = {}
local p
local sh = ARGV[1]
for i = 1, n do
  local hid, m = ARGV[i + 1], KEYS[i]
  local r
  -- mutex_release_fast.lua: the fast paths of a mutex release, as statement
  -- text (see mutex_acquire_fast.lua), inlined by mutex_release.lua at its
  -- top level before its helpers and by mutex_release_batch.lua in its loop
  -- over the releases, its returns turned into "r = ..." (see expand in
  -- assemble.go): a release with nobody waiting, and one that hands the
  -- mutex to a live first waiter. It reads and builds the mutex string (see
  -- mutex_value.lua) with anchored matches, as it runs on every release. It
  -- uses the includer's names: m (the mutex key), hid, sh (a string whose
  -- first character is "1" for sharded pub/sub) and p (the prefix, or nil).
  -- It returns REL_FREED when it released, each return the last thing its
  -- path does, and falls through, having changed nothing, for what the full
  -- path must decide: not held by hid, a lock delay, a dead first waiter, a
  -- restart grace (or a first waiter whose lease does not say yet that it is
  -- over), a hash of an older layout.
  local v = redis.pcall('GET', m) -- an error (an older layout's hash) takes the full path
  local holder, rest
  if type(v) == 'string' then
    -- One match for the holder and the rest, "|<tok>|<ld>|<i>|<free>|<w>"
    -- (each string function called costs Redis about 1k instructions; hold
    -- ids have no "|").
    holder, rest = string.match(v, '^([^|]*)(|.*)$')
  end
  if holder == hid then
    -- Held by hid.
    local i = string.match(rest, '^|%d+|%d*|(%d+)||$')
    if i then
      -- No lock delay, nobody waits: idle now, kept 'i' ms (see common.lua).
      redis.call('SET', m, rest, 'PX', i)
      r = REL_FREED
    elseif string.sub(rest, -2) == '|1' then
      -- Waiters, no lock delay: hand over to the first waiter as m_handoff
      -- would, when its lease exists (it always has 'ld') and says that no
      -- restart grace is pending. That is what g = "0" in any lease of the
      -- namespace proves (see check_caller): the waiter's, read here anyway,
      -- spares a read of the releaser's.
      p = p or string.match(m, '^{[^}]*}:')
      local res = string.sub(m, #p + 3)
      local q = p .. K_QUEUE .. 'm:' .. res
      local to = redis.call('LINDEX', q, '0')
      if to then
        local sid = string.match(to, P_HOLD_SID)
        local l = redis.call('HMGET', p .. K_LEASE .. sid, 'ld', 'ttl', 'g')
        if l[1] and l[3] == '0' then
          redis.call('LPOP', q)
          local last, tok, n = string.sub(rest, 2, string.find(rest, '|', 2, true) - 1)
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
          local ld, ttl = l[1], l[2]
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
          redis.call('SET', m, to .. '|' .. tok .. '|' .. ld .. '|' .. idle .. '||1', 'PX', held)
          -- grant_message.lua: the grant message "g|<hid>|<token>|<resource>", the
          -- one encoder of it (internal/lease decodes it): statement text inlined
          -- where a grant is published, by notify (common.lua) and by the
          -- closure-free hand-offs of mutex_release_fast.lua and rwmutex_release.lua.
          -- The includer names the grantee's hold id to, the token tok (a string)
          -- and the resource res; msg is the message.
          local msg = 'g|' .. to .. '|' .. tok .. '|' .. res
          redis.call(string.sub(sh, 1, 1) == '1' and 'SPUBLISH' or 'PUBLISH', p .. K_CHANNEL .. sid, msg)
          r = REL_FREED
        end
      end
    end
  end
  out[i] = r or R_SLOW
end
return out
