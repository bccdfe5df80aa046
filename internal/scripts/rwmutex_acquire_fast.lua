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
    --@inline new_token.lua
    local ld = ld or '0' -- the lease's, "0" when unset
    --@inline expiry_ms.lua
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
      return n -- a grant: its bare token (see parseAcquire)
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
      return {R_BUSY, wait, -1}
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
      return {R_BUSY, wait, pos}
    end
  end
end
