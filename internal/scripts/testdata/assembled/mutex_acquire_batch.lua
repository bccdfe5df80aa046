local R_BUSY, R_SLOW, K_LEASE, K_QUEUE = 0, -9, "s:", "q:"
-- fastpath.lua: what the fast paths of scripts with a "--@helpers" line use;
-- first in those scripts and in the batch scripts only (see scripts.go,
-- batch.go), so it must stay small.

-- now_s: the server's clock in µs as a string, read at most once per call
-- by new_token.lua (inlined where a token is taken).
local now_s
-- mutex_acquire_batch.lua: the fast path of mutex_acquire.lua for several
-- acquire attempts of one session at once (see batch.go): one call, one
-- read of the caller's lease and at most one TIME for all of them
-- (new_token.lua, fastpath.lua's now_s), where each attempt alone would pay its own.
-- The fast path is mutex_acquire_fast.lua, as in mutex_acquire.lua.
-- KEYS[1] the caller's lease {ns}:s:<sid>   KEYS[2..n+1] the mutexes
-- {ns}:m:<name>, one per attempt (two attempts may name the same mutex:
-- they run in order, as two calls of mutex_acquire.lua would)
-- ARGV[1] options "<held>|<ld>|<i>", as the tail of mutex_acquire.lua's
-- ARGV[2]   ARGV[2..n+1] "<queue><hid>" per attempt: queue as in
-- mutex_acquire.lua ("1" or "2" to queue when busy), then the hold id
-- Returns one reply per attempt, in order: the reply mutex_acquire.lua's
-- fast path would give, or {R_SLOW} for an attempt the fast path does not
-- cover (no lease with g = "0", a withdrawn hold id, a holder whose lease
-- is gone, a lock delay, waiters before the caller, a queue left without
-- its mutex, a retried grant ...): the
-- client then sends mutex_acquire.lua for that one alone. An attempt
-- answered {R_SLOW} changed nothing.
local n = #ARGV - 1
local fields = {'g'}
for i = 1, n do
  fields[i + 1] = 'x:' .. string.sub(ARGV[i + 1], 2)
end
local lease = redis.call('HMGET', KEYS[1], unpack(fields))
local out = {}
if lease[1] ~= '0' then
  for i = 1, n do
    out[i] = {R_SLOW}
  end
  return out
end

local opts = ARGV[1]
local bar = string.find(opts, '|', 1, true)
local held, tail = string.sub(opts, 1, bar - 1), string.sub(opts, bar)
local p = string.match(KEYS[2], '^{[^}]*}:')
local ok, lk = true, nil -- the lease is checked above, for every attempt

for i = 1, n do
  local aq, m = ARGV[i + 1], KEYS[i + 1]
  local hid = string.sub(aq, 2)
  local r
  if not lease[i + 1] then
    -- mutex_acquire_fast.lua: the fast path of a mutex acquire attempt, as
    -- statement text (no function of its own: every function is a closure
    -- Redis creates on every call, see scripts.go), inlined where it runs: by
    -- mutex_acquire.lua at its top level before its helpers, and by
    -- mutex_acquire_batch.lua in its loop over the attempts, its returns
    -- turned into "r = ..." (see expand in assemble.go). It reads the mutex
    -- string (see mutex_value.lua) with anchored matches, as it runs on every
    -- lock.
    -- It reads the caller's lease (key lk) only before it grants or queues,
    -- unless the includer has read it for it (ok true; mutex_acquire_batch.lua
    -- reads it once for all its attempts): the lease must exist with no grace
    -- pending (g = "0", see check_caller) and hid must not be withdrawn, else
    -- the full path decides. A try (queue neither "1" nor "2") that finds the
    -- mutex held by a live session answers busy without it, writing nothing
    -- (where the full path would answer that the caller's lease is gone, that
    -- a restart grace runs, that hid was withdrawn or that the epoch marker is
    -- missing). It uses the includer's names: ok (nil until the lease is
    -- read), lk, m (the mutex key), hid, aq (a string whose first character
    -- is "1" to queue when busy, "2" to queue a hold id sent for the first
    -- time, which is in no queue yet: no LPOS looks for it; anything else not
    -- to queue), p (the prefix, or nil), held and tail (held_ms and
    -- "|<ld>|<i>"; nil, in mutex_acquire.lua, to read them from its ARGV[2]
    -- when needed).
    -- It returns the reply (as mutex_acquire.lua's), each return the last
    -- thing its path does, and falls through, having changed nothing, for
    -- what the full path must decide: a holder whose lease is gone, a lock
    -- delay, waiters before the caller, a queue left without its mutex, a
    -- retried grant, a hash of an older layout.
    local v = redis.pcall('GET', m) -- an error (a hash of an older layout) takes the full path
    local last, wait, qa
    if not v then
      -- No mutex: never used, or expired, which a held mutex or a running
      -- lock delay never is (see mutex_value.lua). Grant, with a token from
      -- the clock alone (see common.lua idle_ms), unless a queue is left: a
      -- queue can outlive its mutex (a lock delay keeps the mutex only until
      -- it ends, which a waiter's heartbeat may not renew in time), and the
      -- full path serves its live waiters first.
      p = p or string.match(m, '^{[^}]*}:')
      if redis.call('EXISTS', p .. K_QUEUE .. 'm:' .. string.sub(m, #p + 3)) == 0 then
        last = false
      end
    elseif type(v) == 'string' then
      -- No holder, no lock delay running, nobody waiting: grant, if the mutex
      -- has a token. (Anchored matches: each string function called costs
      -- Redis about 1k instructions, more than a short match.)
      last = string.match(v, '^|(%d+)|%d*|%d*||$')
      if not last then
        local holder, sid = string.match(v, '^(([^.|]+)%.[^|]*)|')
        if holder and holder ~= hid then
          -- Held by a live session: busy, the same reply as busy() in
          -- common.lua; queued first when asked. (sid_of and prefix_of
          -- spelled out: as helpers in fastpath.lua they would cost every
          -- lock+release a closure each, see docs/performance.md.)
          p = p or string.match(m, '^{[^}]*}:')
          wait = redis.call('PTTL', p .. K_LEASE .. sid)
          if wait > 0 then
            qa = string.sub(aq, 1, 1)
          else
            wait = nil -- a holder whose lease is gone: the full path's
          end
        end
      end
    end
    if wait and qa ~= '1' and qa ~= '2' then
      r = {R_BUSY, wait, -1} -- a try: no lease needed, nothing written
    elseif last ~= nil or wait then
      -- A grant (last) or a queue entry (wait) needs the caller's lease, read
      -- here unless the includer has (ok).
      if ok == nil then
        local l = redis.call('HMGET', lk, 'g', 'x:' .. hid)
        ok = l[1] == '0' and not l[2]
      end
      if ok and wait then
        local q = p .. K_QUEUE .. 'm:' .. string.sub(m, #p + 3)
        local pos = qa == '1' and redis.call('LPOS', q, hid)
        if not pos then
          pos = redis.call('RPUSH', q, hid) - 1
          if pos == 0 then
            -- A new queue expires unless its waiters' heartbeats keep it.
            if not held then
              held = string.match(ARGV[2], '^..(%d+)')
            end
            redis.call('PEXPIRE', q, held)
          end
          if string.sub(v, -1) == '|' then
            redis.call('SET', m, v .. '1', 'KEEPTTL') -- the waiter mark (see mutex_value.lua)
          end
        end
        r = {R_BUSY, wait, pos}
      elseif ok then
        -- Grant: the mutex string of a new holder, kept held_ms (see
        -- common.lua; the holder's heartbeat keeps it). SET also drops the
        -- expiry of an idle mutex.
        if not tail then
          held, tail = string.match(ARGV[2], '^..(%d+)(|.*)$') -- one call, not three
        end
        local tok, n
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
        redis.call('SET', m, hid .. '|' .. tok .. tail .. '||', 'PX', held)
        r = n -- a grant: its bare token (see parseAcquire)
      end
    end
  end
  out[i] = r or {R_SLOW}
end
return out
