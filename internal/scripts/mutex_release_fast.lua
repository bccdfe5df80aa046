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
    return REL_FREED
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
        --@inline new_token.lua
        local ld, ttl = l[1], l[2]
        --@inline expiry_ms.lua
        redis.call('SET', m, to .. '|' .. tok .. '|' .. ld .. '|' .. idle .. '||1', 'PX', held)
        --@inline grant_message.lua
        redis.call(string.sub(sh, 1, 1) == '1' and 'SPUBLISH' or 'PUBLISH', p .. K_CHANNEL .. sid, msg)
        return REL_FREED
      end
    end
  end
end
